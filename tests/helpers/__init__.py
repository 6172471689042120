"""Test scaffolding shared by the tests and the benchmarks; not part of the gemgym package.

Pytest puts ``tests/`` on ``sys.path`` (its rootdir conftest), so tests import these as
``helpers.envs`` and so on; benchmarks go through ``benchmarks/_testkit.py``. Worker processes
started by the ``process`` backend inherit ``sys.path``; Ray workers get
:func:`helpers.envs.worker_pythonpath` in their ``runtime_env``.

* :mod:`helpers.envs`: :class:`~helpers.envs.CountingEnv` (a seeded episode of fixed length),
  :class:`~helpers.envs.FaultyEnv` (crashes its process, hangs or raises on request) and the
  synthetic ``bench:*`` envs of the vector benchmarks (:func:`~helpers.envs.register_bench_envs`);
* :mod:`helpers.net`: free ports, waiting for a port, and servers started in a subprocess;
* :mod:`helpers.scripted_server`: a scripted OpenAI-compatible chat server with faults on
  demand;
* :mod:`helpers.extras`: skips that name the gemgym extra a test needs.
"""
