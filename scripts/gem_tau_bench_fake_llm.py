"""A scripted OpenAI chat-completions server for GEM's tau-bench retail example (no LLM, no key).

GEM's ``examples/multiagent/tau_bench_retail/run_eval.py`` calls the model and the user
simulator through litellm; with ``OPENAI_BASE_URL`` pointing here it runs unchanged, offline:

* the user simulator (a request without ``tools``) states the task's instruction, then ends the
  conversation (``###STOP###``);
* the agent (a request with ``tools``): ``--mode oracle`` makes the task's ground-truth tool calls,
  one per request, then answers with the task's expected outputs (every task should score 1);
  ``--mode lazy`` answers at once without a tool call (only tasks that change nothing score 1).

Run from the example's directory, with tau-bench cloned into ``tau-bench/`` and litellm
installed (see docs/gem-compat.md)::

    export PYTHONPATH=tau-bench LITELLM_LOCAL_MODEL_COST_MAP=True
    python path/to/gemgym/scripts/gem_tau_bench_fake_llm.py --port 8799 --mode oracle &
    OPENAI_BASE_URL=http://127.0.0.1:8799/v1 OPENAI_API_KEY=x \\
        python -m gemgym.compat.gem run_eval.py
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _reply(body: dict[str, Any], tasks: dict[str, Any], mode: str) -> dict[str, Any]:
    messages = body["messages"]
    if "tools" not in body:  # the user simulator
        system = messages[0]["content"]
        instruction = system.split("Instruction: ", 1)[1].split("\n\nRules:", 1)[0]
        return {"role": "assistant", "content": instruction if len(messages) == 2 else "###STOP###"}
    task = tasks[messages[1]["content"]]  # the user's first message is the instruction
    calls = [a for a in task.actions if a.name != "respond"] if mode == "oracle" else []
    made = sum(1 for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
    if made < len(calls):
        call = calls[made]
        function = {"name": call.name, "arguments": json.dumps(call.kwargs)}
        tool_call = {"id": f"call_{made}", "type": "function", "function": function}
        return {"role": "assistant", "content": None, "tool_calls": [tool_call]}
    return {"role": "assistant", "content": "Done. " + " ".join(task.outputs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--mode", choices=["oracle", "lazy"], default="oracle")
    args = parser.parse_args()
    from tau_bench.envs.retail.tasks_test import TASKS_TEST

    tasks = {t.instruction: t for t in TASKS_TEST}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            message = _reply(body, tasks, args.mode)
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            choice = {"index": 0, "message": message, "finish_reason": finish}
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            out = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [choice],
                    "usage": usage,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
