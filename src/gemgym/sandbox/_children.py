"""What the forked children of a sandbox run (standard library only, no gemgym imports).

Its source text comes after :mod:`gemgym.sandbox._wire`'s and before
:mod:`gemgym.sandbox._runner`'s in the program passed to the sandboxed interpreter (see
``_runner``'s docstring for the whole design):

* :func:`run_program`: the **program** (untrusted), with the run's rlimits; for runs with hidden
  tests it then sends its top-level names and answers the test process's calls;
* :func:`run_check`: the **test process** (trusted): reads the hidden tests, runs them against
  proxies of the program's names (plain values only cross; ``==`` in asserts is type-aware,
  :func:`strict_equal`), and writes the verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import Any, NoReturn

if "pump" not in globals():  # on the host; inside the sandbox _wire's text comes first
    from gemgym.sandbox._wire import (
        MAX_DEPTH,
        decode_value,
        encode_value,
        recv_message,
        send_message,
        write_all,
    )


# -- limits --------------------------------------------------------------------------------------


def apply_limits(spec: dict[str, Any]) -> None:
    """Apply the run's resource limits to this process (inherited by its children)."""
    import resource

    def lim(which: int, value: int | None) -> None:
        if value is not None and value > 0:
            resource.setrlimit(which, (value, value))

    cpu = spec.get("cpu")
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 1))
    lim(resource.RLIMIT_AS, spec.get("memory"))
    lim(resource.RLIMIT_FSIZE, spec.get("fsize"))
    lim(resource.RLIMIT_NPROC, spec.get("nproc"))
    lim(resource.RLIMIT_NOFILE, spec.get("nofile"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Python ignores SIGXFSZ; restore the default so that the file-size limit is visible.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _print_exc(exc: BaseException) -> None:
    import traceback

    tb = exc.__traceback__
    tb = tb.tb_next if tb is not None else None  # drop this runner's own frame
    traceback.print_exception(type(exc), exc, tb)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


# -- the program (untrusted) ---------------------------------------------------------------------


def _serve_calls(namespace: dict[str, Any], call_in: int, call_out: int) -> None:
    """Send the program's top-level names to the test process and answer its calls."""
    import types

    table: list[Any] = []

    def keep(obj: Any) -> int:
        table.append(obj)
        return len(table) - 1

    def lookup(ref: int) -> Any:
        return table[ref]

    names = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") or isinstance(value, types.ModuleType):
            continue
        names[name] = encode_value(value, keep)
    send_message(call_out, {"names": names})
    while True:
        try:
            msg = recv_message(call_in)
        except (EOFError, OSError):
            return
        try:
            target = lookup(int(msg["ref"]))
            op = msg.get("op")
            if op == "call":
                args = decode_value(msg.get("args", []), lookup)
                kwargs = decode_value(msg.get("kwargs", {"d": []}), lookup)
                result = target(*args, **kwargs)
            elif op == "getattr":
                result = getattr(target, str(msg["name"]))
            elif op == "list":
                result = list(target)
            else:
                raise ValueError(f"unknown operation {op!r}")
            reply = {"value": encode_value(result, keep)}
        except SystemExit as e:
            reply = {"raise": "SystemExit", "message": str(e.code)}
        except BaseException as e:
            reply = {"raise": type(e).__name__, "message": str(e)[:2000]}
        _flush()
        send_message(call_out, reply)


def run_program(spec: dict[str, Any], call_fds: tuple[int, int] | None) -> NoReturn:
    """Run the spec's program as ``__main__`` in this process (then serve calls), and exit."""
    import builtins
    import io
    import types

    for name, text in (spec.get("files") or {}).items():
        with open(name, "w", encoding="utf-8") as f:
            f.write(text)
    apply_limits(spec)
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    sys.argv = ["-c"]
    namespace = module.__dict__
    code = 0
    setup = spec.get("setup")
    if setup:
        real_out, real_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = io.StringIO()
        try:
            exec(compile(setup, "<setup>", "exec"), namespace)
        except BaseException:
            pass
        finally:
            sys.stdout, sys.stderr = real_out, real_err
    try:
        source = (spec.get("prefix") or "") + (spec.get("code") or "")
        exec(compile(source, "<string>", "exec"), namespace)
        if call_fds is not None:
            _flush()
            _serve_calls(namespace, *call_fds)
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException as e:
        _print_exc(e)
        code = 1
    _flush()
    os._exit(code)


# -- the hidden tests (trusted) ------------------------------------------------------------------


class ProgramError(Exception):
    """The program raised an exception that is not one of Python's built-in ones."""


def strict_equal(a: Any, b: Any, depth: int = 0) -> bool:
    """Equality of plain values that also compares their types, as the tests' asserts use it.

    A ``bool`` equals only a ``bool`` (``True == 1`` is false here), a list only a list and a
    tuple only a tuple, element by element; ``int`` and ``float`` compare by value, as in
    Python. Anything else compares with ``==``.
    """
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if depth < MAX_DEPTH:
        if ta is list or ta is tuple:
            return (
                ta is tb
                and len(a) == len(b)
                and all(strict_equal(x, y, depth + 1) for x, y in zip(a, b, strict=True))
            )
        if ta is dict:
            return (
                tb is dict
                and len(a) == len(b)
                and all(k in b and strict_equal(v, b[k], depth + 1) for k, v in a.items())
            )
    return bool(a == b)


def _strict_asserts(source: str) -> Any:
    """``source`` compiled with every ``==``/``!=`` inside an ``assert`` made
    :func:`strict_equal` (called as ``__strict_equal__``)."""
    import ast

    class Strict(ast.NodeTransformer):
        def visit_Assert(self, node: ast.Assert) -> ast.AST:
            node.test = Compare().visit(node.test)
            return node

    class Compare(ast.NodeTransformer):
        def visit_Compare(self, node: ast.Compare) -> ast.AST:
            self.generic_visit(node)
            if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Eq | ast.NotEq):
                return node
            call = ast.Call(
                ast.Name("__strict_equal__", ast.Load()), [node.left, node.comparators[0]], []
            )
            if isinstance(node.ops[0], ast.NotEq):
                return ast.UnaryOp(ast.Not(), call)
            return call

    tree = Strict().visit(ast.parse(source, "<check>"))
    return compile(ast.fix_missing_locations(tree), "<check>", "exec")


def run_check(
    spec: dict[str, Any], call_in: int, call_out: int, verdict_fd: int, tests_fd: int
) -> NoReturn:
    """Read the hidden tests, run them against proxies of the program, write the verdict.

    The tests arrive on ``tests_fd`` (the server's request channel, which the server leaves
    alone until the run is over) only now, after the program was forked: neither the server
    nor the program ever holds them in memory. ``C`` on the verdict pipe says they were read.
    """
    import builtins

    verdict: dict[str, Any] = {"passed": False, "error": None}
    try:
        check = str(recv_message(tests_fd).get("check") or "")
        os.close(tests_fd)
        write_all(verdict_fd, b"C")
    except BaseException as e:
        with contextlib.suppress(OSError):
            write_all(verdict_fd, json.dumps({"passed": False, "error": f"no tests: {e}"}).encode())
        os._exit(0)

    def rpc(message: dict[str, Any]) -> Any:
        try:
            send_message(call_out, message)
            reply = recv_message(call_in)
        except (EOFError, OSError) as e:
            raise ProgramError("the program stopped answering") from e
        if "raise" in reply:
            name, text = str(reply["raise"]), str(reply.get("message", ""))
            cls = getattr(builtins, name, None)
            if (
                isinstance(cls, type)
                and issubclass(cls, Exception)
                and not issubclass(cls, StopIteration | StopAsyncIteration)
                and cls.__module__ == "builtins"
            ):  # a StopIteration would silently end the tests' own loops (map, all, ...)
                raise cls(text)
            raise ProgramError(f"{name}: {text}")
        return decode_value(reply.get("value"), remote)

    class Remote:
        """An object that lives in the program's process (a function, an instance, ...)."""

        __slots__ = ("_ref",)

        def __init__(self, ref: int) -> None:
            self._ref = ref

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return rpc(
                {
                    "op": "call",
                    "ref": self._ref,
                    "args": enc(list(args)),
                    "kwargs": enc(dict(kwargs)),
                }
            )

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return rpc({"op": "getattr", "ref": self._ref, "name": name})

        def __iter__(self) -> Any:
            return iter(rpc({"op": "list", "ref": self._ref}))

        def __repr__(self) -> str:
            return f"<object of the program #{self._ref}>"

    def remote(ref: int) -> Remote:
        return Remote(ref)

    def enc(value: Any) -> Any:
        def ref_of(obj: Any) -> int:
            if type(obj) is Remote:
                return obj._ref
            raise TypeError(
                f"a test argument of type {type(obj).__name__} cannot be sent to the program "
                "(only plain values and the program's own objects)"
            )

        return encode_value(value, ref_of)

    try:
        apply_limits({**spec, "nproc": None, "fsize": None})
        try:
            manifest = recv_message(call_in)
        except (EOFError, OSError, ValueError):
            raise ProgramError("the program did not finish") from None
        names = manifest.get("names")
        if type(names) is not dict:
            raise ProgramError("the program sent no names")
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        prefix = spec.get("prefix") or ""
        if prefix:
            exec(compile(prefix, "<prefix>", "exec"), namespace)
        # The program's names the tests see: its entry point only, when one is named; else
        # every name it defined except the prefix's and Python's built-ins (a program defining
        # ``abs`` or ``len`` must not answer for the tests' own calls of them).
        entry = spec.get("entry_point")
        trusted = (set(namespace) | set(dir(builtins))) - {entry}
        for name, data in names.items():
            if type(name) is str and name not in trusted and (not entry or name == entry):
                namespace[name] = decode_value(data, remote)
        namespace["__strict_equal__"] = strict_equal
        exec(_strict_asserts(check), namespace)
        verdict["passed"] = True
    except BaseException as e:
        _print_exc(e)
        verdict["error"] = f"{type(e).__name__}: {e}"[:2000]
    _flush()
    with contextlib.suppress(OSError):
        write_all(verdict_fd, json.dumps(verdict).encode())
    os._exit(0)
