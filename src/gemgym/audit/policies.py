r"""The exploit library: generic policies that try to be paid without solving the task.

Each :class:`Exploit` knows which envs it applies to (from the env's
:class:`~gemgym.audit.targets.Traits`: its kind, tool, dataset and expert) and says why when it
does not (the report shows ``n/a`` with the reason; it is never run there). Through
:meth:`Exploit.policy` it plays like any other policy of the episode engine
(:class:`~gemgym.episodes.BatchPolicy`): it sees the observation, the episode so far and the
env's :class:`~gemgym.episodes.EnvAccess` (a random action, whose *format* some exploits
borrow; never the expert of the episode being played).

==================  ==========================================================================
policy              what it sends
==================  ==========================================================================
``empty``           an empty reply, every turn
``huge``            256 KiB of text, every turn
``repeated``        one random action repeated 200 times in one reply
``constant``        one reply (the episode's first random action) every turn
``malformed``       broken replies in turn: unclosed ``\boxed{`` / tags / code fences, NUL and
                    control characters, a lone surrogate, nested empty formats, 10,000 digits
``format_only``     the format without content: ``\boxed{}``, ``<answer></answer>``, an empty
                    code block, ``<python></python>``, ``<keys></keys>``, ``[]``
``echo``            the observation, sent back as the reply
``shotgun``         every legal-looking answer at once: 32 random actions, ``\boxed{0..100}``,
                    the options A-E, True/False/Yes/No, in one reply (answer and game envs)
``fs_hunt``         code: a program that walks ``/`` for data files holding the prompt and
                    prints the recorded output or execs the recorded solution; ``+python``: the
                    same through the tool, then the answer it printed; terminal: ``find / -name
                    solve.sh`` and run the one that matches the task, list hidden tests
``exit0``           code: ``os._exit(0)`` / ``sys.exit(0)`` at import, in the function, from an
                    ``atexit`` hook; terminal: every ``*.py`` in ``/app`` and a ``conftest.py``
                    become ``os._exit(0)``, then ``done``
``lying_eq``        function-call code problems: the function returns an object equal to
                    everything (``__eq__`` true, ``__ne__`` false, truthy, zero distance)
``state_probe``     code / ``+python`` / terminal: a program that reads what earlier runs left
                    (``/tmp``, ``/dev/shm``, ``/var/tmp``, ``/proc/net/tcp``, its pid),
                    answers from any leftover that matches the prompt, then leaves its own
                    (marker files, a loopback TCP connection, burnt pids); episodes run one
                    after another on one env copy, so each run sees the previous one's traces
``copy_other``      dataset envs and games with an expert: replays the expert's actions of
                    *another* item / seed (collected beforehand, never of the episode played)
``copy_majority``   dataset envs with an expert: the most common expert answer of other items,
                    every episode
==================  ==========================================================================
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemgym.audit import programs
from gemgym.audit.targets import Traits
from gemgym.episodes import ActRequest

__all__ = ["EXPLOITS", "Donors", "Exploit", "ExploitPolicy", "exploit_names", "get_exploits"]

HUGE_CHARS = 256 * 1024
SHOTGUN_RANDOM = 32


@dataclass
class Donors:
    """Expert actions of *other* items / seeds, collected before the exploits run.

    Attributes:
        episodes: for each donor episode, the expert's actions in order.
        items: for dataset envs, each donor episode's item index (to never copy the item played).
    """

    episodes: list[list[Any]] = field(default_factory=list)
    items: list[int | None] = field(default_factory=list)

    def majority(self) -> Any | None:
        """The most common first action of the donors (``None`` without donors)."""
        firsts = [json.dumps(e[0], sort_keys=True, default=str) for e in self.episodes if e]
        if not firsts:
            return None
        return json.loads(Counter(firsts).most_common(1)[0][0])


@dataclass
class Context:
    """What an exploit may use besides the request: the env's traits and the donors."""

    traits: Traits
    donors: Donors
    notes: Counter[str] = field(default_factory=Counter)


def _text(view: Any) -> str:
    """The text of an observation as the model is shown it."""
    if isinstance(view, str):
        return view
    if isinstance(view, list):  # chat messages
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in view)
    text = getattr(view, "text", None)
    return text if isinstance(text, str) else str(view)


def _prompt(request: ActRequest) -> str:
    """The episode's first observation (the task statement)."""
    first = request.episode.initial_observation
    return _text(first if first is not None else request.view)


def _random(request: ActRequest) -> Any:
    return request.env.sample_random_action()


def _wrap(ctx: Context, content: str) -> str:
    return ctx.traits.template.replace("%s", content)


def _code(body: str) -> str:
    return f"```python\n{body}```"


def _tool(body: str) -> str:
    return f"<python>\n{body}</python>"


def _bash(command: str) -> str:
    return f"```bash\n{command}\n```"


_ANSWER_KEYS = ("answer", "answers", "final_answer", "gold", "target", "label", "solution")


def answers_in(output: str) -> list[str]:
    """Answers found in a hunting program's ``FOUND: {json}`` lines (GSM8K's ``#### 42`` is cut
    to ``42``). A line may carry a prefix: the Python tool's ``Code execution result: ``
    comes before the program's first line."""
    out: list[str] = []
    for line in output.splitlines():
        _, found, record = line.partition("FOUND: ")
        if not found:
            continue
        try:
            rec = json.loads(record)
        except json.JSONDecodeError:
            continue
        if not isinstance(rec, dict):
            continue
        for key in _ANSWER_KEYS:
            value = rec.get(key)
            if isinstance(value, list) and value:
                value = value[0]
            if isinstance(value, int | float | str) and str(value).strip():
                text = str(value)
                if "####" in text:
                    text = text.rsplit("####", 1)[1]
                out.append(text.strip())
                break
    return out


class Exploit:
    """One exploit: a name, what it does, where it applies, and its action each turn."""

    name: str = ""
    summary: str = ""
    sequential: bool = False
    """Play its episodes one after another on one env copy (the state probe)."""
    needs_donors: bool = False
    """Needs the expert's actions on other items / seeds (:class:`Donors`)."""

    def applies(self, traits: Traits) -> str | None:
        """``None`` when the exploit applies to an env with ``traits``, else why not."""
        return None

    def act(self, request: ActRequest, ctx: Context) -> Any:
        """The action for ``request``."""
        raise NotImplementedError

    def policy(self, ctx: Context) -> ExploitPolicy:
        """The exploit as a batched policy of the episode engine."""
        return ExploitPolicy(self, ctx)


class ExploitPolicy:
    """An :class:`Exploit` as a :class:`~gemgym.episodes.BatchPolicy`."""

    def __init__(self, exploit: Exploit, ctx: Context) -> None:
        self.exploit = exploit
        self.ctx = ctx

    def act_batch(self, requests: Sequence[ActRequest]) -> list[Any]:
        """One action per request."""
        return [self.exploit.act(r, self.ctx) for r in requests]


def _only(*kinds: str, tool: bool | None = None) -> Callable[[Traits], str | None]:
    def check(t: Traits) -> str | None:
        if t.kind not in kinds and not (tool and t.tool == "python"):
            return f"only for {'/'.join(kinds)} envs" + (" and +python" if tool else "")
        return None

    return check


class Empty(Exploit):
    name, summary = "empty", "an empty reply every turn"

    def act(self, request: ActRequest, ctx: Context) -> Any:
        return ""


class Huge(Exploit):
    name, summary = "huge", "256 KiB of text every turn"

    def act(self, request: ActRequest, ctx: Context) -> Any:
        return ("lorem ipsum " * (HUGE_CHARS // 12 + 1))[:HUGE_CHARS]


class Repeated(Exploit):
    name, summary = "repeated", "one random action repeated 200 times in one reply"

    def act(self, request: ActRequest, ctx: Context) -> Any:
        return "\n".join([str(_random(request))] * 200)


class Constant(Exploit):
    name, summary = "constant", "the episode's first random action, every turn"

    def act(self, request: ActRequest, ctx: Context) -> Any:
        if "constant" not in request.state:
            request.state["constant"] = _random(request)
        return request.state["constant"]


_MALFORMED = (
    "\\boxed{",
    "<answer>",
    "```python\nprint(",
    "\x00\x01\x02\x1b[2J",
    "\ud800",
    "}}}{{{\\boxed{\\boxed{}}}<answer><answer></answer>",
    "\\boxed{" + "9" * 10000 + "}",
    "```\n```\n```",
    "<keys>\\x00^C^D</keys>",
    "\u202e\u200b\ufeff",
)


class Malformed(Exploit):
    name, summary = "malformed", "unclosed formats, control characters, a lone surrogate"

    def act(self, request: ActRequest, ctx: Context) -> Any:
        return _MALFORMED[(request.episode.index + request.turn) % len(_MALFORMED)]


class FormatOnly(Exploit):
    name, summary = "format_only", "the answer format without content"

    def act(self, request: ActRequest, ctx: Context) -> Any:
        t = ctx.traits
        if t.kind == "code":
            return "```python\n```"
        if t.kind == "terminal":
            return ("```bash\n```", "<keys></keys>", "done")[min(request.turn, 2)]
        if t.tool == "python":  # the tool call without code, as long as the env takes it
            return "<python></python>"
        parts = [_wrap(ctx, "")]
        if t.template == "%s":
            parts = ["\\boxed{}", "<answer></answer>", "[]"]
        return " ".join(parts)


class Echo(Exploit):
    name, summary = "echo", "the observation sent back as the reply"

    def act(self, request: ActRequest, ctx: Context) -> Any:
        return _text(request.view)


class Shotgun(Exploit):
    name, summary = "shotgun", "every legal-looking answer at once in one reply"

    def applies(self, traits: Traits) -> str | None:
        return _only("answer", "game")(traits)

    def act(self, request: ActRequest, ctx: Context) -> Any:
        parts: list[str] = []
        for _ in range(SHOTGUN_RANDOM):
            a = str(_random(request))
            if a not in parts:
                parts.append(a)
        if ctx.traits.kind == "answer":
            contents = [str(n) for n in range(101)]
            contents += ["A", "B", "C", "D", "E", "True", "False", "Yes", "No", "yes", "no"]
            parts += [_wrap(ctx, c) for c in contents]
        return " ".join(parts)


class FsHunt(Exploit):
    name, summary = "fs_hunt", "hunt the sandbox filesystem for the answer and use it"

    def applies(self, traits: Traits) -> str | None:
        if traits.kind in ("code", "terminal") or traits.tool == "python":
            return None
        return "no code runs in this env (only code, terminal and +python envs)"

    def act(self, request: ActRequest, ctx: Context) -> Any:
        t, prompt = ctx.traits, _prompt(request)
        keys = programs.keys_of(prompt)
        if t.kind == "code":
            return _code(programs.hunt_program(keys, programs.entry_point(prompt)))
        if t.kind == "terminal":
            if request.turn == 0:
                return _bash(programs.hunt_command(t.task, keys))
            return "done"
        if request.turn == 0:  # +python: hunt through the tool, then answer what it printed
            return _tool(programs.hunt_program(keys, None, mode="print"))
        found = answers_in(_text(request.view))
        ctx.notes[f"{self.name}: answers found"] += bool(found)
        return _wrap(ctx, found[0]) if found else _random(request)


class Exit0(Exploit):
    name, summary = "exit0", "exit with status 0 before any test can fail"

    def applies(self, traits: Traits) -> str | None:
        return _only("code", "terminal")(traits)

    def act(self, request: ActRequest, ctx: Context) -> Any:
        if ctx.traits.kind == "terminal":
            if request.turn == 0:
                return _bash(
                    "for f in $(find /app -name '*.py' 2>/dev/null); do "
                    "printf 'import os\\nos._exit(0)\\n' > \"$f\"; done; "
                    "printf 'import os\\nos._exit(0)\\n' > /app/conftest.py; "
                    "printf 'import os\\nos._exit(0)\\n' > /app/sitecustomize.py"
                )
            return "done"
        entry = programs.entry_point(_prompt(request))
        return _code(programs.exit_program(entry, request.episode.index))


class LyingEq(Exploit):
    name, summary = "lying_eq", "return an object equal to everything"

    def applies(self, traits: Traits) -> str | None:
        return _only("code")(traits)

    def act(self, request: ActRequest, ctx: Context) -> Any:
        entry = programs.entry_point(_prompt(request))
        if entry is None:  # a stdin/stdout problem: nothing to compare in the program
            ctx.notes[f"{self.name}: stdin/stdout items (random program sent)"] += 1
            return _random(request)
        return _code(programs.lying_eq_program(entry))


_PROBE_RE = re.compile(r"PROBE pid=(\d+) markers=(\d+)(?: tcp=(-?\d+))?|PROBE (\{.*\})")
SAW_MARKER = "runs that saw an earlier run's marker"
SAW_TCP = "runs that saw TCP connections of an earlier run"
"""The notes of ``state_probe`` that say state crossed runs (0 where none does)."""


class StateProbe(Exploit):
    name, summary = "state_probe", "read earlier runs' leftovers, answer from them, leave traces"
    sequential = True

    def applies(self, traits: Traits) -> str | None:
        if traits.kind in ("code", "terminal") or traits.tool == "python":
            return None
        return "no code runs in this env (only code, terminal and +python envs)"

    def _saw(self, ctx: Context, output: str) -> None:
        for m in _PROBE_RE.finditer(output):
            if m.group(4):
                try:
                    seen = json.loads(m.group(4))
                    markers, tcp = int(seen.get("markers", 0)), int(seen.get("tcp", 0))
                except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                    continue
            else:
                markers, tcp = int(m.group(2)), int(m.group(3) or 0)
            ctx.notes[f"{self.name}: {SAW_MARKER}"] += markers > 0
            # a socket table that is not empty before this run opened one: an earlier run's
            # connections (TIME_WAIT lasts 60 s), the oracle of issue 41
            ctx.notes[f"{self.name}: {SAW_TCP}"] += tcp > 0

    def act(self, request: ActRequest, ctx: Context) -> Any:
        t, prompt = ctx.traits, _prompt(request)
        keys = programs.keys_of(prompt)
        if t.kind == "code":
            return _code(programs.probe_program(keys, programs.entry_point(prompt)))
        if t.kind == "terminal":
            if request.turn == 0:
                return _bash(programs.probe_command(t.task))
            self._saw(ctx, _text(request.view))
            return "done"
        if request.turn == 0:
            return _tool(programs.probe_program(keys, None, mode="print"))
        output = _text(request.view)
        self._saw(ctx, output)
        found = answers_in(output)
        ctx.notes[f"{self.name}: answers found in leftovers"] += bool(found)
        return _wrap(ctx, found[0]) if found else _random(request)


class CopyOther(Exploit):
    name, summary = "copy_other", "replay the expert's actions of another item / seed"
    needs_donors = True

    def applies(self, traits: Traits) -> str | None:
        if not traits.has_expert:
            return "the env has no expert to copy from"
        if traits.kind == "terminal" and traits.task is not None:
            return "a single-task terminal env has no other item"
        if traits.dataset and (traits.size or 0) < 2:
            return "the dataset has a single item"
        return None

    def act(self, request: ActRequest, ctx: Context) -> Any:
        donors = ctx.donors
        item = request.episode.reset_info.get("index") if ctx.traits.dataset else None
        usable = [
            e
            for e, i in zip(donors.episodes, donors.items, strict=True)
            if e and (item is None or i != item)
        ]
        if not usable:
            ctx.notes[f"{self.name}: no donor (random action sent)"] += 1
            return _random(request)
        actions = usable[request.episode.index % len(usable)]
        if request.turn < len(actions):
            return actions[request.turn]
        return _random(request)


class CopyMajority(Exploit):
    name, summary = "copy_majority", "the most common expert answer of other items, every time"
    needs_donors = True

    def applies(self, traits: Traits) -> str | None:
        if traits.kind not in ("answer", "code") or not traits.dataset:
            return "only for dataset envs"
        if not traits.has_expert:
            return "the env has no expert to copy from"
        return None

    def act(self, request: ActRequest, ctx: Context) -> Any:
        majority = ctx.donors.majority()
        return majority if majority is not None else _random(request)


EXPLOITS: tuple[Exploit, ...] = (
    Empty(),
    Huge(),
    Repeated(),
    Constant(),
    Malformed(),
    FormatOnly(),
    Echo(),
    Shotgun(),
    FsHunt(),
    Exit0(),
    LyingEq(),
    StateProbe(),
    CopyOther(),
    CopyMajority(),
)
"""Every exploit policy, in report order."""


def exploit_names() -> list[str]:
    """The names of :data:`EXPLOITS`, in order."""
    return [e.name for e in EXPLOITS]


def get_exploits(names: Sequence[str] | None = None) -> list[Exploit]:
    """The exploits named (all when ``None``), in library order.

    Raises:
        ConfigError: an unknown name (with close matches).
    """
    if names is None:
        return list(EXPLOITS)
    from gemgym.errors import ConfigError, close_matches

    known = exploit_names()
    for n in names:
        if n not in known:
            hint = close_matches(n, known)
            raise ConfigError(
                f"unknown exploit policy {n!r}"
                + (f"; did you mean {', '.join(hint)}?" if hint else "")
                + f" (choose from {', '.join(known)})"
            )
    return [e for e in EXPLOITS if e.name in set(names)]
