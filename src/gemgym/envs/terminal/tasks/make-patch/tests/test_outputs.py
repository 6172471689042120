"""The patch is applied here to a copy of the old tree, and the result compared with the new
tree as this test knows it (not with /app/new, which the agent could change)."""

import os
import shutil
import subprocess
import tempfile

OLD = {
    "a.txt": "one\ntwo\nthree\n",
    "lib/mod.py": "def f():\n    return 1\n",
    "removed.txt": "gone\n",
}
NEW = {
    "a.txt": "one\n2\nthree\nfour\n",
    "lib/mod.py": "def f():\n    return 2\n",
    "lib/added.txt": "fresh\n",
}


def tree(root):
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path) as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def test_patch_turns_old_into_new():
    work = tempfile.mkdtemp()
    os.mkdir(f"{work}/tree")
    for name, text in OLD.items():
        os.makedirs(os.path.dirname(f"{work}/tree/{name}"), exist_ok=True)
        with open(f"{work}/tree/{name}", "w") as f:
            f.write(text)
    shutil.copyfile("/app/changes.patch", f"{work}/changes.patch")
    done = subprocess.run(
        ["patch", "-p1", "-i", f"{work}/changes.patch"],
        cwd=f"{work}/tree",
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0
    assert tree(f"{work}/tree") == NEW


def test_old_and_new_untouched():
    assert tree("/app/old") == OLD
    assert tree("/app/new") == NEW
