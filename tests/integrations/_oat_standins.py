"""Stand-ins for the modules Oat 0.2.4 imports that cannot be installed beside gemgym.

Oat is installed for real (``pip install --no-deps --ignore-requires-python oat-llm==0.2.4``
plus ``gemgym[oat]``), and every Oat class the tests use is Oat's own. Three of its imports
are put in place here, each only when the real module does not import:

* ``launchpad``: Oat's process launcher. ``dm-launchpad`` has wheels up to CPython 3.10 and
  gemgym needs 3.11. ``oat.utils.ipc`` imports it and the code under test never calls it: any
  use of the stand-in raises.
* ``pyarrow.plasma``: Oat's shared-memory transport between actors and learners, removed in
  pyarrow 12 (Oat pins pyarrow < 12; gemgym's ``datasets`` needs a newer one). Any use raises;
  the tests hand episodes from actor to learner in memory (:class:`MemoryIPC`).
* ``vllm`` (only with ``engine=True``, where vLLM is not installed): the inference engine.
  Oat's actor ``init`` builds ``vllm.SamplingParams`` and ``vllm.LLM``; the stand-ins record
  their arguments, the LLM gives the model's real tokenizer and refuses to generate. Sampling
  goes through gemgym's transformers backend (the tests' ``make_backend``). Where vLLM is
  installed, the actor's engine is a real ``vllm.LLM``.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Refusing(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"{self.__name__}.{name}: this stand-in is never to be used")


def _available(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


class SamplingParams:
    """Records vLLM sampling arguments (Oat sets ``logprobs`` after construction)."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


class LoRARequest:
    def __init__(self, *args: Any) -> None:
        self.args = args


class LLM:
    """Oat's actor builds its engine with ``vllm.LLM(**vllm_args)``; this one only holds the
    model's tokenizer."""

    def __init__(self, model: str, **kwargs: Any) -> None:
        from transformers import AutoTokenizer

        self.model = model
        self.kwargs = kwargs
        self._tokenizer = AutoTokenizer.from_pretrained(model)

    def get_tokenizer(self) -> Any:
        return self._tokenizer

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the stand-in engine does not generate: use make_backend()")


def install(engine: bool) -> list[str]:
    """Put the stand-ins in place where the real modules are missing; returns their names."""
    used: list[str] = []
    if not _available("launchpad"):
        sys.modules["launchpad"] = _Refusing("launchpad")
        used.append("launchpad")
    if not _available("pyarrow.plasma"):
        try:
            import pyarrow
        except ImportError:  # vLLM's own environment has no pyarrow at all
            pyarrow = sys.modules["pyarrow"] = types.ModuleType("pyarrow")
        plasma = _Refusing("pyarrow.plasma")
        sys.modules["pyarrow.plasma"] = plasma
        pyarrow.plasma = plasma  # type: ignore[attr-defined]
        used.append("pyarrow.plasma")
    if engine and not _available("vllm"):
        vllm = types.ModuleType("vllm")
        vllm.SamplingParams = SamplingParams  # type: ignore[attr-defined]
        vllm.LLM = LLM  # type: ignore[attr-defined]
        vllm.__version__ = "0.8.4"  # type: ignore[attr-defined]
        lora = types.ModuleType("vllm.lora")
        request = types.ModuleType("vllm.lora.request")
        request.LoRARequest = LoRARequest  # type: ignore[attr-defined]
        sys.modules.update({"vllm": vllm, "vllm.lora": lora, "vllm.lora.request": request})
        used.append("vllm")
    return used


def remove(used: list[str]) -> None:
    """Take the stand-ins out of ``sys.modules`` again (the modules that imported them keep
    their references); other tests then see the real state of the environment (TRL, say,
    looks for vLLM and must not find a stand-in)."""
    for name in used:
        if name == "vllm":
            for sub in ("vllm", "vllm.lora", "vllm.lora.request"):
                sys.modules.pop(sub, None)
        elif name == "pyarrow.plasma":
            sys.modules.pop("pyarrow.plasma", None)
            pyarrow = sys.modules.get("pyarrow")
            if pyarrow is not None and getattr(pyarrow, "__spec__", None) is None:
                sys.modules.pop("pyarrow")
            elif pyarrow is not None and isinstance(getattr(pyarrow, "plasma", None), _Refusing):
                del pyarrow.plasma
        else:
            sys.modules.pop(name, None)


@contextmanager
def installed(engine: bool) -> Iterator[list[str]]:
    """:func:`install` for the imports in the ``with`` block, then :func:`remove`."""
    used = install(engine)
    try:
        yield used
    finally:
        remove(used)


class MemoryIPC:
    """Oat's ``PlasmaShmClient`` interface (``serialize_ipc`` / ``deserialize_ipc``) in memory:
    the same pickling, no shared-memory store."""

    def __init__(self) -> None:
        self._store: dict[bytes, bytes] = {}

    def serialize_ipc(self, data: Any) -> bytes:
        key = len(self._store).to_bytes(8, "big")
        self._store[key] = pickle.dumps(data)
        return key

    def deserialize_ipc(self, key: bytes) -> Any:
        return pickle.loads(self._store.pop(key))
