"""No import cycle among the modules of src/gemgym.

The graph has an edge ``a -> b`` when module ``a`` imports ``b`` when it is itself imported: the
module-level imports, excluding those under ``if TYPE_CHECKING:`` (never run) and those inside
functions (run at call time, after every module involved has finished importing).
"""

from __future__ import annotations

import ast
from pathlib import Path

import gemgym

SRC = Path(gemgym.__file__).resolve().parent.parent


def _modules() -> dict[str, tuple[Path, bool]]:
    mods: dict[str, tuple[Path, bool]] = {}
    for path in sorted((SRC / "gemgym").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        mods[".".join(parts)] = (path, is_pkg)
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported (not in defs or classes'
    methods, not under ``if TYPE_CHECKING:``)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            found.append(stmt)
        elif isinstance(stmt, ast.If):
            if not _is_type_checking(stmt.test):
                found += _import_time_imports(stmt.body)
            found += _import_time_imports(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            found += _import_time_imports(stmt.body)
            for handler in stmt.handlers:
                found += _import_time_imports(handler.body)
            found += _import_time_imports(stmt.orelse) + _import_time_imports(stmt.finalbody)
        elif isinstance(stmt, ast.With | ast.ClassDef):
            found += _import_time_imports(stmt.body)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the gemgym modules it imports at import time."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        package = name if is_pkg else name.rpartition(".")[0]
        deps: set[str] = set()
        for stmt in _import_time_imports(ast.parse(path.read_text(), str(path)).body):
            if isinstance(stmt, ast.Import):
                deps.update(a.name for a in stmt.names if a.name in mods)
                continue
            base = stmt.module or ""
            if stmt.level:
                anchor = package.split(".")[: len(package.split(".")) - (stmt.level - 1)]
                base = ".".join([*anchor, *([stmt.module] if stmt.module else [])])
            for alias in stmt.names:
                if f"{base}.{alias.name}" in mods:  # `from pkg import submodule`
                    deps.add(f"{base}.{alias.name}")
                elif base in mods:
                    deps.add(base)
        deps.discard(name)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_the_modules_and_their_imports() -> None:
    graph = import_graph()
    assert "gemgym.registry" in graph["gemgym"]
    assert {"gemgym.core", "gemgym.env_spec", "gemgym.errors"} <= graph["gemgym.registry"]
    assert "gemgym.registry" not in graph["gemgym.core"]  # only under TYPE_CHECKING there
    assert "gemgym.agents.openai" not in graph["gemgym.agents"]  # only inside functions


def test_find_cycle_reports_the_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_gemgym_modules() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _all_imports(path: Path) -> set[str]:
    """Every gemgym module named by any import in the file (in functions, under TYPE_CHECKING)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("gemgym")}


def test_lower_layers_do_not_reach_up_even_at_call_time() -> None:
    """The layering the import-time graph cannot see: the spec and the core name nothing above
    them, and the agent base names none of the agents built on it, not even in a function or
    for type checking (the cycles core <-> registry and agents.base <-> builtin/openai)."""
    mods = _modules()
    rules = {
        "gemgym.env_spec": {"gemgym.errors"},
        "gemgym.core": {"gemgym.errors", "gemgym.env_spec"},
        # the vector env is below the agents (agents read their envs through it, type-only)
        "gemgym.agents.base": {"gemgym.core", "gemgym.errors", "gemgym.vector"},
        # the registry is below the vector envs (they make their envs through it; make_vec
        # lives in gemgym.vector): registry <-> vector is not a cycle even at call time
        "gemgym.registry": {
            "gemgym._console",  # a leaf: it imports no gemgym module (checked below)
            "gemgym.core",
            "gemgym.env_spec",
            "gemgym.envs",
            "gemgym.errors",
            "gemgym.wrappers.common",
        },
    }
    rules["gemgym._console"] = set()
    for module, allowed in rules.items():
        imported = {n for n in _all_imports(mods[module][0]) if n in mods}
        assert imported <= allowed, f"{module} imports {sorted(imported - allowed)}"


def test_no_submodule_is_shadowed_by_a_public_name() -> None:
    """``gemgym.X`` must not be both a module and another public object (``import gemgym.X as m``
    would then give the object, not the module)."""
    import importlib

    for name, (_, _) in _modules().items():
        if name.count(".") != 1:
            continue
        leaf = name.split(".")[1]
        if leaf in gemgym.__all__:
            assert getattr(gemgym, leaf) is importlib.import_module(name), leaf
