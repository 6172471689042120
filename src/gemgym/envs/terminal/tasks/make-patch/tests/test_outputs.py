import filecmp
import shutil
import subprocess
import tempfile

OLD = {
    "a.txt": "one\ntwo\nthree\n",
    "lib/mod.py": "def f():\n    return 1\n",
    "removed.txt": "gone\n",
}


def test_patch_turns_old_into_new():
    work = tempfile.mkdtemp()
    shutil.copytree("/app/old", f"{work}/tree")
    done = subprocess.run(
        ["patch", "-p1", "-i", "/app/changes.patch"],
        cwd=f"{work}/tree",
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stdout[-300:] + done.stderr[-300:]
    cmp = filecmp.dircmp(f"{work}/tree", "/app/new")
    assert not cmp.left_only and not cmp.right_only and not cmp.diff_files
    sub = cmp.subdirs["lib"]
    assert not sub.left_only and not sub.right_only and not sub.diff_files


def test_old_untouched():
    for name, text in OLD.items():
        with open(f"/app/old/{name}") as f:
            assert f.read() == text
