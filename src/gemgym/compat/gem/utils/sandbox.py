"""``gem.utils.sandbox``: ``run_python`` on gemgym's sandbox.

``sandbox_type`` ``"none"`` and ``"bwrap"`` both run in gemgym's isolating sandbox (GEM's
``"none"`` was a substring blacklist over a bare subprocess); the ``timeout`` is honoured (GEM
always waited 10 s).
"""

from __future__ import annotations

from gemgym.sandbox import shared_sandbox

__all__ = ["DEFAULT_TIMEOUT", "ERROR_MSG_PREFIX", "run_python"]

DEFAULT_TIMEOUT = 10
ERROR_MSG_PREFIX = "Failed to execute program: "


def run_python(
    code: str,
    sandbox_type: str = "none",
    stdin: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[bool, str, str]:
    """Run ``code``: ``(success, stdout, stderr)`` as GEM returns them."""
    result = shared_sandbox().run(code, stdin or "", timeout=float(timeout))
    stderr = result.stderr
    if result.timed_out:
        stderr = f"{stderr}\nTimeoutError: timed out after {timeout} seconds".lstrip("\n")
    elif result.error:
        stderr = f"{ERROR_MSG_PREFIX}{result.error}"
    return result.exit_code == 0 and not result.timed_out, result.stdout, stderr
