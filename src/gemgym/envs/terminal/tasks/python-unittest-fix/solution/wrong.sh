cd /app/project
cat > test_textutil.py <<'PY'
import unittest


class TextUtilTest(unittest.TestCase):
    def test_nothing(self):
        pass


if __name__ == "__main__":
    unittest.main()
PY
python3 -m unittest
