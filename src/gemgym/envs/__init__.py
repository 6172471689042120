"""Built-in environments. Each module registers its ids beside its code (see :mod:`gemgym.registry`).

Modules here must import nothing heavy at module level: the registry imports all of them on the
first lookup. Heavy dependencies (datasets, reasoning_gym, math_verify, ...) are imported inside
the functions that use them.
"""
