"""Without its extras, gemgym says what to install: in a process that can import only the standard
library and gemgym's own dependencies (as after ``pip install gemgym``, whatever this venv has),
every gemgym module imports or raises :class:`~gemgym.errors.DependencyNotInstalled` naming an
extra, every registered env plays or raises it naming the extra its spec declares
(:attr:`gemgym.EnvSpec.extra`, which ``helpers.extras.env_params`` skips by), and ``gemgym
train`` names ``gemgym[train]``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Runs in the child first: its meta-path finders find no module (and no distribution's metadata)
# outside the standard library and the distributions gemgym requires (transitively, no extras).
BARE = r"""
import importlib.metadata as md
import re
import sys

from packaging.requirements import Requirement


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(name, seen):
    key = norm(name)
    if key in seen:
        return
    seen.add(key)
    try:
        reqs = md.requires(name) or []
    except md.PackageNotFoundError:
        return
    for line in reqs:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            closure(req.name, seen)


dists = set()
closure("gemgym", dists)
allowed = set(sys.stdlib_module_names) | {"gemgym", "_distutils_hack"}
for module, owners in md.packages_distributions().items():
    if any(norm(o) in dists for o in owners):
        allowed.add(module)


class Refusing:  # a meta-path finder, as if only the allowed modules were installed

    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] not in allowed:
            return None
        return self.inner.find_spec(fullname, path, target)

    def find_distributions(self, *args, **kwargs):
        found = getattr(self.inner, "find_distributions", None)
        for dist in found(*args, **kwargs) if found else ():
            if norm(dist.metadata["Name"] or "") in dists:
                yield dist

    def __getattr__(self, name):
        return getattr(self.inner, name)


sys.meta_path[:] = [Refusing(f) for f in sys.meta_path]
for name in [m for m in sys.modules if m.partition(".")[0] not in allowed]:
    del sys.modules[name]  # packaging, imported above
"""

AUDIT = r"""
import importlib, json, pkgutil, re, warnings
import gemgym
from gemgym.errors import DependencyNotInstalled
from gemgym.registry import list_envs, spec

warnings.simplefilter("ignore")
EXTRA = re.compile(r'pip install "gemgym\[([A-Za-z0-9_.-]+)\]"')
bad = []
for info in pkgutil.walk_packages(gemgym.__path__, "gemgym."):
    if info.name.rpartition(".")[2] == "__main__":
        continue
    try:
        importlib.import_module(info.name)
    except DependencyNotInstalled as e:
        if not EXTRA.search(str(e)):
            bad.append(f"import {info.name}: names no extra: {e}")
    except Exception as e:
        bad.append(f"import {info.name}: {type(e).__name__}: {e}")
refused = 0
for env_id in list_envs():
    declared = spec(env_id).extra
    try:
        env = gemgym.make(env_id)
        try:
            env.reset(seed=0)
        finally:
            env.close()
    except DependencyNotInstalled as e:
        refused += 1
        named = EXTRA.search(str(e))
        if named is None or named.group(1) != declared:
            bad.append(f"make {env_id}: spec.extra={declared!r} but: {e}")
    except Exception as e:
        bad.append(f"make {env_id}: {type(e).__name__}: {e}")
print(json.dumps({"bad": bad, "envs": len(list_envs()), "refused": refused}))
"""


def _bare(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BARE + code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


@pytest.mark.slow
def test_every_module_and_env_names_its_missing_extra(tmp_path: Path) -> None:
    out = _bare(AUDIT, tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["bad"] == [], "\n".join(result["bad"])
    assert result["envs"] > result["refused"] > 0  # the extras' envs refused, the rest played


def test_train_names_its_extra(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom gemgym.cli import main\n"
        "sys.exit(main(['train', 'game:GuessTheNumber-v0-easy', '--updates', '1']))\n"
    )
    out = _bare(code, tmp_path)
    assert out.returncode == 2, out.stderr[-4000:]
    assert 'pip install "gemgym[train]"' in out.stderr
