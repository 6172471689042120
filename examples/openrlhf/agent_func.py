"""The agent file OpenRLHF loads with --train.agent_func_path (see README.md beside it).

Envs and tokenizer come from GEMGYM_ENVS (presets guess, math, qa or env ids, comma-separated)
and GEMGYM_TOKENIZER (the model path).
"""

from gemgym.integrations.openrlhf import make_agent_executor

AgentExecutor = make_agent_executor()
