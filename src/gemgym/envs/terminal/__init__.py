"""Terminal tasks (``terminal:*``): a sandboxed shell, tasks in the Terminal-Bench layout, hidden
tests that grade the final workspace. See :mod:`gemgym.envs.terminal.env` and docs/terminal.md."""
