import hashlib
import os
import subprocess

REPO = "/app/repo"
# git reads the agent's repository, which may carry configuration that runs programs (hooks,
# fsmonitor, signature checks) or rewrites what git reports (replace refs, caches): none of it
# applies here, and whether the tree is clean is computed by this test, not asked of git.
ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/nonexistent",
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_OPTIONAL_LOCKS": "0",
}
SAFE = [
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "log.showSignature=false",
    "-c",
    "core.attributesFile=/dev/null",
]


def git(*args, data=None):
    done = subprocess.run(
        ["git", *SAFE, "-C", REPO, *args],
        input=data,
        capture_output=True,
        env=ENV,
        timeout=30,
        check=True,
    )
    return done.stdout.decode().strip()


def entries(text, sep):
    out = {}
    for record in text.split("\0"):
        if record:
            meta, path = record.split("\t", 1)
            out[path] = meta.split(sep)
    return out


def clean_tree():
    """Whether HEAD, the index and the files on disk agree, with no untracked file."""
    head = entries(git("ls-tree", "-r", "-z", "--full-tree", "HEAD"), " ")
    index = entries(git("ls-files", "-s", "-z"), " ")
    if {p: (m[0], m[2]) for p, m in head.items()} != {p: (m[0], m[1]) for p, m in index.items()}:
        return False
    if any(m[2] != "0" for m in index.values()):
        return False
    for path, (mode, sha, _) in index.items():
        full = os.path.join(REPO, path)
        if mode == "120000":
            if not os.path.islink(full):
                return False
            data = os.readlink(full).encode()
        else:
            if os.path.islink(full) or not os.path.isfile(full):
                return False
            with open(full, "rb") as f:
                data = f.read()
            if mode == "100755" and not os.access(full, os.X_OK):
                return False
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != sha:
            return False
    others = []
    for folder, dirs, files in os.walk(REPO):
        if folder == REPO:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), REPO)
            if rel not in index:
                others.append(rel)
    if not others:
        return True
    ignored = (
        subprocess.run(
            ["git", *SAFE, "-C", REPO, "check-ignore", "--no-index", "-z", "--stdin"],
            input="\0".join(others).encode(),
            capture_output=True,
            env=ENV,
            timeout=30,
        )
        .stdout.decode()
        .split("\0")
    )
    return not set(others) - set(ignored)


def test_main_unchanged():
    assert git("log", "--format=%s", "main").splitlines() == ["Initial commit"]


def test_feature_commit():
    assert git("log", "--format=%s", "feature").splitlines() == ["Add greeting", "Initial commit"]
    assert git("cat-file", "blob", "feature:app.py") == 'print("v2")'
    assert git("cat-file", "blob", "feature:greeting.txt") == "hello"


def test_clean_tree():
    assert clean_tree()
