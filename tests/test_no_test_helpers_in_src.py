"""Test scaffolding stays out of the package: no module under ``src/`` imports a test helper or
defines one, ``gemgym.testing`` holds only what env authors call, and no folder of ``tests/``
shadows a package an extra installs (``tests/textarena`` once made ``import textarena`` succeed
without TextArena, so its tests failed instead of skipping)."""

from __future__ import annotations

import ast
from pathlib import Path

import gemgym.testing
from _skip_guard import _required

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "gemgym"
TESTS = ROOT / "tests"

# what env authors call (docs/concepts.md): the checker, its error, the bad-action sweep
PUBLIC_TESTING = {
    "EnvCheckError",
    "MAX_OBS_GROWTH",
    "bad_actions",
    "check_bad_actions",
    "check_env",
}


def _top_level_test_modules() -> set[str]:
    """Names importable from ``tests/`` (pytest puts it on ``sys.path``): its modules and
    packages, and ``tests`` itself."""
    names = {"tests", "conftest"}
    for entry in TESTS.iterdir():
        if entry.suffix == ".py":
            names.add(entry.stem)
        elif entry.is_dir() and not entry.name.startswith((".", "__")):
            names.add(entry.name)
    return names


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif (  # importlib.import_module("helpers.envs") and the like
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def _helper_names() -> set[str]:
    """What the test envs, servers and port helpers export (``__all__``)."""
    import helpers.envs
    import helpers.net
    import helpers.scripted_server

    return {
        n for mod in (helpers.envs, helpers.net, helpers.scripted_server) for n in mod.__all__
    } - {"BENCH_IDS"}


def test_no_module_under_src_imports_a_test_helper() -> None:
    forbidden = _top_level_test_modules()
    assert "helpers" in forbidden and "_skip_guard" in forbidden
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path in sorted(SRC.rglob("*.py"))
        for line, name in _imports(path)
        if name.split(".")[0] in forbidden
    ]
    assert bad == []


def test_no_module_under_src_defines_a_test_helper() -> None:
    """The scaffolding moved to tests/helpers is not defined again in the package."""
    names = _helper_names()
    assert {"CountingEnv", "FaultyEnv", "ScriptedChatServer", "free_port"} <= names
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in names:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: defines {node.name}")
    assert bad == []


def test_gemgym_testing_holds_only_what_users_call() -> None:
    assert set(gemgym.testing.__all__) == PUBLIC_TESTING
    public = {n for n in vars(gemgym.testing) if not n.startswith("_")}
    defined_here = {
        n
        for n in public
        if getattr(getattr(gemgym.testing, n), "__module__", "") == "gemgym.testing"
    }
    assert defined_here <= PUBLIC_TESTING


def test_no_tests_folder_shadows_a_package_an_extra_installs() -> None:
    pyproject = ROOT / "pyproject.toml"
    extras = set(
        __import__("tomllib").loads(pyproject.read_text())["project"]["optional-dependencies"]
    )
    _, modules = _required(pyproject, ",".join(sorted(extras)))
    shadowing = sorted(_top_level_test_modules() & set(modules))
    assert shadowing == [], f"tests/ names that shadow installed packages: {shadowing}"
    assert "textarena" in modules  # the check sees the package the old folder shadowed
