import unittest

from textutil import slugify, truncate


class TextUtilTest(unittest.TestCase):
    def test_slugify(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")
        self.assertEqual(slugify("  Many   spaces  "), "many-spaces")

    def test_truncate(self):
        self.assertEqual(truncate("short", 10), "short")
        self.assertEqual(truncate("abcdefghij", 8), "abcde...")


if __name__ == "__main__":
    unittest.main()


class MoreTextUtilTest(unittest.TestCase):
    def test_edge_cases(self):
        self.assertEqual(slugify("C++ & Rust: 2 languages"), "c-rust-2-languages")
        self.assertEqual(truncate("abcdef", 6), "abcdef")
        self.assertEqual(len(truncate("x" * 50, 20)), 20)
