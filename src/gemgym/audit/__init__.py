"""Reward-integrity audits: generic exploit policies against every env (``gemgym audit``).

An RL policy optimises whatever pays. :func:`audit` plays a library of exploit policies
(:mod:`gemgym.audit.policies`: empty, huge, repeated and malformed replies, the format without
content, echoing the observation, every answer at once, hunting the sandbox's filesystem for the
answer, exiting with status 0, a lying ``__eq__``, probing earlier runs' leftovers, answers
copied from other items) on each env, with gemgym's episode engine, and reports per env and per
policy the mean return and success rate against the random agent's and the expert's. An exploit
that beats random by a margin and a one-sided permutation test (:mod:`gemgym.audit.stats`) is
flagged, unless the env's card says why a fixed reply is legitimately good
(:mod:`gemgym.audit.expected`).

>>> from gemgym.audit import audit
>>> report = audit(["game:GuessTheNumber-v0-easy"], episodes=6, policies=["empty"])
>>> report.exit_status
0

* :mod:`~gemgym.audit.targets`: which envs (ids, globs, suites, ``+python``) and their traits;
* :mod:`~gemgym.audit.policies` and :mod:`~gemgym.audit.programs`: the exploits;
* :mod:`~gemgym.audit.runner`: :func:`audit`;
* :mod:`~gemgym.audit.report`: :class:`AuditReport` (JSON, Markdown, a rich table);
* :mod:`~gemgym.audit.stats`: the flag rule.

See ``docs/audit.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports

if TYPE_CHECKING:
    from gemgym.audit.policies import (
        EXPLOITS as EXPLOITS,
        Exploit as Exploit,
        exploit_names as exploit_names,
    )
    from gemgym.audit.report import (
        ArmResult as ArmResult,
        AuditReport as AuditReport,
        EnvAudit as EnvAudit,
    )
    from gemgym.audit.runner import (
        audit as audit,
    )


__getattr__, __dir__ = lazy_exports(globals())
