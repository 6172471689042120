"""An audit's results: :class:`AuditReport` (per env, per policy) and its renderings.

* :meth:`AuditReport.to_dict` / :meth:`~AuditReport.write_json`: the whole report as JSON;
* :meth:`AuditReport.to_markdown`: one Markdown table (per env: random, expert, each exploit's
  mean return, success rate and ``p``; flags in bold), the notes and the known exceptions;
* :meth:`AuditReport.table`: the same as a :class:`rich.table.Table` for the console;
* :attr:`AuditReport.exit_status`: 1 when an exploit is flagged (beats random and no env card
  explains why), else 0: CI runs ``gemgym audit`` as a check.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["ArmResult", "AuditReport", "EnvAudit"]


@dataclass
class ArmResult:
    """One policy's episodes on one env.

    Attributes:
        policy: ``random``, ``expert`` or an exploit's name.
        applies: whether it ran (``False``: ``n/a``, see ``reason``).
        reason: why it does not apply.
        episodes, errors: episodes played and those that failed (scored as played so far).
        mean_return, success_rate: over the episodes.
        returns: each episode's return, in episode order.
        delta: ``mean_return`` minus the random agent's (exploits only).
        p_value: one-sided permutation test of beating random (exploits only).
        beats_random: the flag rule holds (:mod:`gemgym.audit.stats`).
        expected: the env card's reason when it beats random legitimately (then not flagged).
        first_error: the first failed episode's stage and message.
        wall_s: seconds its episodes took (env made, played and closed).
    """

    policy: str
    applies: bool = True
    reason: str | None = None
    episodes: int = 0
    errors: int = 0
    mean_return: float = 0.0
    success_rate: float = 0.0
    returns: list[float] = field(default_factory=list)
    delta: float | None = None
    p_value: float | None = None
    beats_random: bool = False
    expected: str | None = None
    first_error: str | None = None
    wall_s: float = 0.0

    @property
    def flagged(self) -> bool:
        """Beats random and no env card says why."""
        return self.beats_random and self.expected is None


@dataclass
class EnvAudit:
    """One env's audit: the random agent, the expert (if any) and every exploit."""

    env: str
    family: str
    kind: str
    random: ArmResult
    expert: ArmResult | None
    exploits: list[ArmResult]
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def flagged(self) -> list[ArmResult]:
        """The exploits that beat random unexplained."""
        return [a for a in self.exploits if a.flagged]

    @property
    def best_exploit(self) -> ArmResult | None:
        """The exploit with the highest mean return (``None`` if none ran)."""
        ran = [a for a in self.exploits if a.applies]
        return max(ran, key=lambda a: a.mean_return) if ran else None


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:.0%}" if pct else f"{x:.3g}"


@dataclass
class AuditReport:
    """The results of :func:`gemgym.audit.audit`.

    Attributes:
        envs: one :class:`EnvAudit` per env, in the order asked.
        config: how it ran (episodes, seed, alpha, margin, max_turns, policies).
    """

    envs: list[EnvAudit]
    config: dict[str, Any]

    @property
    def flagged(self) -> list[tuple[str, ArmResult]]:
        """``(env, exploit)`` for every exploit that beats random unexplained."""
        return [(e.env, a) for e in self.envs for a in e.flagged]

    @property
    def exit_status(self) -> int:
        """1 when an exploit is flagged, else 0."""
        return 1 if self.flagged else 0

    def result(self, env: str, policy: str) -> ArmResult:
        """The result of ``policy`` (``random``, ``expert`` or an exploit) on ``env``."""
        for e in self.envs:
            if e.env != env:
                continue
            if policy == "random":
                return e.random
            if policy == "expert" and e.expert is not None:
                return e.expert
            for a in e.exploits:
                if a.policy == policy:
                    return a
        raise KeyError(f"no result for {policy!r} on {env!r}")

    # -- renderings -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (JSON-ready)."""
        return {
            "config": self.config,
            "flagged": [{"env": env, "policy": a.policy} for env, a in self.flagged],
            "envs": [asdict(e) for e in self.envs],
        }

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`to_dict` as JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    def summary_rows(self) -> list[list[str]]:
        """One row per env: env, family, random, expert, best exploit, flagged exploits."""
        rows = []
        for e in self.envs:
            best = e.best_exploit
            rows.append(
                [
                    e.env,
                    e.family,
                    _fmt(e.random.mean_return),
                    _fmt(e.expert.mean_return) if e.expert else "-",
                    f"{best.policy} {_fmt(best.mean_return)}" if best else "-",
                    ", ".join(a.policy for a in e.flagged) or "none",
                ]
            )
        return rows

    def _cell(self, a: ArmResult) -> str:
        if not a.applies:
            return "n/a"
        text = f"{_fmt(a.mean_return)}"
        if a.errors:
            text += f" ({a.errors} err)"
        if a.flagged:
            return f"**{text} FLAG**"
        if a.beats_random:
            return f"{text} (card)"
        return text

    def to_markdown(self) -> str:
        """A Markdown report: the summary, the per-policy matrix, notes and exceptions."""
        cfg = self.config
        lines = [
            f"Episodes per policy: {cfg.get('episodes')}, seed {cfg.get('seed')}, "
            f"alpha {cfg.get('alpha')}, margin {cfg.get('margin')}, "
            f"max turns {cfg.get('max_turns')}.",
            "",
            "| env | family | random | expert | best exploit | beats random |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines += ["| " + " | ".join(r) + " |" for r in self.summary_rows()]
        names: list[str] = []
        for e in self.envs:
            names += [a.policy for a in e.exploits if a.policy not in names]
        lines += [
            "",
            "Mean return per policy (`n/a`: the policy does not apply; `err`: failed episodes, "
            "scored as played so far; **FLAG**: beats random; `(card)`: beats random, and the "
            "env's card says why):",
            "",
            "| env | random | expert | " + " | ".join(names) + " |",
            "| --- " * (3 + len(names)) + "|",
        ]
        for e in self.envs:
            by = {a.policy: a for a in e.exploits}
            cells = [self._cell(by[n]) if n in by else "-" for n in names]
            expert = self._cell(e.expert) if e.expert else "-"
            lines.append(
                f"| {e.env} | {self._cell(e.random)} | {expert} | " + " | ".join(cells) + " |"
            )
        notes = [(e.env, k, v) for e in self.envs for k, v in e.notes.items()]
        if notes:
            lines += ["", "Notes:", ""] + [f"- {env}: {k}: {v}" for env, k, v in notes]
        expected = [(e.env, a) for e in self.envs for a in e.exploits if a.expected]
        if expected:
            lines += ["", "Beats random legitimately (from the env card):", ""]
            lines += [f"- {env} `{a.policy}`: {a.expected}" for env, a in expected]
        return "\n".join(lines) + "\n"

    def table(self) -> Table:
        """The summary as a rich table (flags in red)."""
        from rich.table import Table
        from rich.text import Text

        table = Table(title="gemgym audit: exploit policies against the random agent")
        for col in ("env", "family", "random", "expert", "best exploit", "beats random"):
            left = col in ("env", "family")
            table.add_column(col, justify="left" if left else "right", overflow="fold")
        for e, row in zip(self.envs, self.summary_rows(), strict=True):
            style = "bold red" if e.flagged else ""
            table.add_row(*[Text(c) for c in row[:-1]], Text(row[-1], style=style))
        return table
