"""Where PPO's time goes: the phases of one training run of ``rewardlab.agents.PPO``, timed.

Trains PPO on a batched env with the per-env settings of ``benchmarks/ppo_speed.py`` (one
torch thread) and splits the run's wall time into its phases, timed around the calls that
run them (everything runs on the CPU, so no device sync is needed):

- ``rollout: steps``: the calls of the rollout's steps (``agents/ppo.py``, ``_RolloutSteps``:
  the policy acts and the env steps, several steps a call), eager or, with ``--compile``,
  compiled;
- ``rollout: storage``: the rest of the rollout (drawing the reset states and the sampling
  noise ahead, copying the steps' tensors into the rollout's buffers, the env taking the
  last carry);
- ``scoring and gae``: the values that bootstrap the rollout's end and its truncated
  episodes, episode statistics, advantages, returns and logging;
- ``update: minibatch step``: the calls of the minibatch step (``PPO._minibatch_step``:
  the loss, its gradient, the gradient's clipping and Adam's step), eager or, with
  ``--compile``, one compiled call (``agents/fused.py``) and its commit;
- ``update: indexing and statistics``: the rest of the update loop (the permutations, the
  learning rate, the statistics).

With ``--compile`` (``compile=True`` for the env and PPO) the compile (or cache load) of
the rollout's steps and the minibatch step happens before the timed run
(``PPO.warm_up``) and is reported apart.

It also counts the torch operators an eager model dispatches per env step of the rollout
(its storage included) and per minibatch step (with ``torch.profiler``),
the number the compiled calls cut.

    python -m benchmarks.ppo_profile                       # CartPole-v1 and Acrobot-v1
    python -m benchmarks.ppo_profile --envs CartPole-v1 --steps 200000
    python -m benchmarks.ppo_profile --compile --name ppo_profile_compiled

Writes ``benchmarks/results/ppo_profile.{json,md}`` (``--name`` for another name).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from benchmarks.machine import describe_machine, recorded_args
from benchmarks.ppo_speed import OURS
from rewardlab import envs
from rewardlab.agents import PPO

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = (
    "agents/ppo.py", "agents/rollout.py", "agents/base.py", "agents/fused.py",
    "envs/core.py", "envs/classic/", "rewardlab/common/compiled.py",
)  # fmt: skip

RESULTS = Path(__file__).parent / "results"


class PhaseClock:
    """Sums wall time per named phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start


@contextlib.contextmanager
def instrumented(model: PPO, clock: PhaseClock) -> Iterator[None]:
    """Time the model's phases (its methods wrapped from outside) while inside."""

    def timed(owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with clock.phase(phase):
                return original(*args, **kwargs)

        setattr(owner, name, wrapper)

    make_steps = model._rollout_steps  # the rollout's steps, eager or compiled

    def rollout_steps() -> Any:
        run = make_steps()

        def timed_steps(*args: torch.Tensor) -> Any:
            with clock.phase("rollout: steps"):
                return run(*args)

        return timed_steps

    model._rollout_steps = rollout_steps  # type: ignore[method-assign]
    timed(model, "_collect_rollout", "rollout (total)")
    timed(model, "_update", "update (total)")
    timed(model, "_minibatch_step", "update: minibatch step")
    yield


def operators(env_id: str, settings: dict[str, Any]) -> dict[str, float]:
    """Torch operators an eager model dispatches per env step of its rollout (storage
    included) and per minibatch step."""
    settings = {k: v for k, v in settings.items() if k not in ("num_envs", "compile")}
    num_envs = OURS[env_id]["num_envs"]
    model = PPO(envs.make(env_id, num_envs=num_envs, seed=0), seed=0, **settings)
    model.learn(model.n_steps * num_envs)  # allocate and warm up

    def count(profile: Any) -> int:
        return sum(
            event.count for event in profile.key_averages() if event.key.startswith("aten::")
        )

    with torch.profiler.profile() as rollout_profile:
        model._collect_rollout()
    size = model.n_steps * num_envs
    rollout = model._rollout
    rows = model.config.batch_size or max(size // 4, 1)
    vector = torch.zeros(size)
    per_head = torch.zeros((size, len(model.heads)))
    batch = (
        rollout.obs.reshape(size, *rollout.obs.shape[2:]), rollout.actions.reshape(size, *rollout.actions.shape[2:]),
        vector, vector, per_head, per_head, torch.arange(rows),
    )  # fmt: skip
    with torch.profiler.profile() as step_profile:
        model._minibatch_step(batch, 1e-3)  # the values do not change what is dispatched
    return {
        "rollout_per_env_step": count(rollout_profile) / model.n_steps,
        "minibatch_step": count(step_profile),
    }


def profile(env_id: str, steps: int, compile: bool = False) -> dict[str, Any]:
    settings = dict(OURS[env_id], compile=compile)
    num_envs = settings.pop("num_envs")
    model = PPO(envs.make(env_id, num_envs=num_envs, seed=0, compile=compile), seed=0, **settings)
    warm_up = model.warm_up()  # the compile or cache load (nothing without compile)
    clock = PhaseClock()
    with instrumented(model, clock):
        start = time.perf_counter()
        model.learn(steps)
        total = time.perf_counter() - start
    seconds = dict(clock.seconds)
    rollout, update = seconds.pop("rollout (total)"), seconds.pop("update (total)")
    phases = {
        "rollout: steps": seconds.get("rollout: steps", 0.0),
        "update: minibatch step": seconds.get("update: minibatch step", 0.0),
    }
    phases["rollout: storage"] = rollout - phases["rollout: steps"]
    phases["update: indexing and statistics"] = (
        update - phases["update: minibatch step"]
    )
    phases["scoring and gae"] = total - rollout - update
    return {
        "env_id": env_id,
        "settings": {"num_envs": num_envs, **settings},
        "steps": model.num_timesteps,
        "total_s": total,
        "steps_per_s": model.num_timesteps / total,
        "phases_s": phases,
        "warm_up_s": warm_up,
        "operators": operators(env_id, settings),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1"])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="ppo_profile")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="PPO(compile=True): the rollout's steps and the minibatch step compiled",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [profile(env_id, args.steps, args.compile) for env_id in args.envs]
    machine = describe_machine()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps({"args": recorded_args(args), "machine": machine, "runs": rows}, indent=2) + "\n"
    )
    lines = [
        "# Where PPO's time goes",
        "",
        f"`rewardlab.agents.PPO` with the settings of `benchmarks/ppo_speed.py`, {args.threads} torch thread(s), "
        + (
            "compiled (`compile=True`; warm-up, the compile or cache load of the rollout's steps and the "
            "minibatch step before the timed run: "
            + ", ".join(f"{r['env_id']} {r['warm_up_s']:.1f} s" for r in rows)
            + ")"
            if args.compile
            else "eager (no compilation)"
        )
        + f". Machine: {machine['summary']}.",
        "",
    ]
    for row in rows:
        lines += [
            f"## {row['env_id']}: {row['steps']:,} steps in {row['total_s']:.1f} s ({row['steps_per_s']:,.0f} steps/s)",
            "",
            f"Settings: `{json.dumps(row['settings'])}`. Torch operators dispatched: "
            f"{row['operators']['rollout_per_env_step']:.0f} per env step of the rollout (policy, env and storage), "
            f"{row['operators']['minibatch_step']} per minibatch step (loss, gradient, clipping and Adam), eagerly.",
            "",
            "| phase | s | share |",
            "|---|---|---|",
            *(
                f"| {name} | {seconds:.2f} | {seconds / row['total_s']:.0%} |"
                for name, seconds in sorted(row["phases_s"].items(), key=lambda item: -item[1])
            ),
            "",
        ]
    flags = f" --compile --name {args.name}" if args.compile else ""
    lines += [
        f"Reproduce: `python -m benchmarks.ppo_profile --envs {' '.join(args.envs)} --steps {args.steps}{flags}`.",
        "",
    ]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
