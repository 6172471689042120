import shutil
import subprocess
import tempfile
from pathlib import Path

HIDDEN = Path(__file__).with_name("hidden_textutil_test.py")


def run_suite():
    work = tempfile.mkdtemp()
    shutil.copy("/app/project/textutil.py", work)
    shutil.copy(HIDDEN, Path(work) / "test_textutil.py")
    return subprocess.run(
        ["python3", "-m", "unittest", "-q"], cwd=work, capture_output=True, text=True, timeout=30
    )


def test_original_suite_passes():
    done = run_suite()
    assert done.returncode == 0, done.stderr[-500:]
