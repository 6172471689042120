"""gemgym envs inside RL trainers: one module per framework, each importing its framework lazily.

==========================================  =======================  ==============================
module                                      extra                    plugs into
==========================================  =======================  ==============================
:mod:`gemgym.integrations.trl`              ``gemgym[trl]``          ``trl.GRPOTrainer``'s
                                                                     ``rollout_func`` (multi-turn,
                                                                     env rewards, env tokens masked)
:mod:`gemgym.integrations.verifiers`        ``gemgym[verifiers]``    a ``verifiers.v1`` taskset, env
                                                                     and in-process harness
                                                                     (``vf-eval``, prime-rl)
:mod:`gemgym.integrations.tinker`           ``gemgym[tinker]``       Tinker cookbook's ``Env``,
                                                                     ``EnvGroupBuilder``,
                                                                     ``RLDataset`` (its renderers)
:mod:`gemgym.integrations.openrlhf`         ``gemgym[openrlhf]``     OpenRLHF's agent function
                                                                     (``AgentInstanceBase`` behind its
                                                                     ``MultiTurnAgentExecutor``)
:mod:`gemgym.integrations.verl`             ``gemgym[verl]``         a verl ``AgentLoopBase``
                                                                     registered as ``gemgym``
:mod:`gemgym.integrations.oat`              ``gemgym[oat]`` and      Oat's ``PPOMultiTurnActor``
                                            ``scripts/install-oat``  (steps gemgym vector envs) and
                                                                     ``PPOMultiTurnLearner``
:mod:`gemgym.integrations.openenv`          ``gemgym[openenv]``      OpenEnv's server (``gemgym
                                                                     serve``) and clients; OpenEnv
                                                                     servers as gemgym envs
==========================================  =======================  ==============================

What the modules share (:mod:`gemgym.integrations.common`): how a run names its envs (one env id,
a factory, or a mapping of names to either, for runs that mix several envs: each example says
which env it plays), the rows a trainer's dataset holds (env name and seed, so every rollout of a
group starts from the same state), and a text-level episode driver for the frameworks that hand
the env the model's text. See ``docs/integrations.md`` for what each was tested with (and for ROLL and RL2,
which have no module).
"""
