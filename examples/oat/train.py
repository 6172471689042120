"""Train an LLM agent with Oat's multi-turn PPO on gemgym envs (the GEM paper's main setup).

Each Oat actor (one per actor GPU, with its vLLM engine) steps ``--num_envs`` copies of every
env in ``--env`` and hands whole episodes, one transition per turn, to the learners; ReBN is
``--gamma 0.9 --whiten_adv``. Commands: ``examples/oat/README.md``. Needs Oat 0.2.4 with its
launcher (``scripts/install-oat``, and ``dm-launchpad``, which has builds for Python <= 3.10
only) and GPUs.
"""

from __future__ import annotations


def main() -> None:
    try:
        from oat.args import default_args_validation, get_default_args
        from oat.interface import get_program, lp
    except ImportError as e:
        if e.name == "launchpad":
            raise SystemExit(
                "Oat's launcher (dm-launchpad) is not installed: it has builds for Python <= "
                "3.10 only, so an Oat program cannot start here (examples/oat/README.md says "
                "what runs without it)"
            ) from None
        if (e.name or "").split(".")[0] == "oat":
            raise SystemExit("Oat is not installed: run scripts/install-oat") from None
        raise

    from gemgym.integrations.oat import GemgymOatActor, GemgymOatArgs, GemgymOatLearner

    args = get_default_args(GemgymOatArgs)
    args.algo = "PPO"
    args = default_args_validation(args)
    program, local_resources = get_program(args, GemgymOatLearner, GemgymOatActor)
    lp.launch(
        program,
        launch_type=args.launch_type,
        local_resources=local_resources,
        terminal="current_terminal",
    )


if __name__ == "__main__":
    main()
