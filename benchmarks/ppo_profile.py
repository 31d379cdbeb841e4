"""Where PPO's time goes: the phases of one training run of ``rewardlab.agents.PPO``, timed.

Trains PPO on a batched env with the per-env settings of ``benchmarks/ppo_speed.py`` (one
torch thread) and splits each iteration's wall time into its phases, timed around the
code that runs them (everything runs on the CPU, so no device sync is needed):

- ``rollout: policy``: normalising observations, sampling actions, their log-probabilities
  and the values, per step;
- ``rollout: env step``: the batched env's ``step``;
- ``rollout: storage``: copying what the step returned into the rollout buffers;
- ``rollout: policy and env steps, compiled``: with ``--compile``, PPO's compiled calls
  of several steps of the policy and the env together (``agents/ppo.py``, ``_RolloutSteps``),
  which replace the three phases above;
- ``scoring and gae``: the values that bootstrap the rollout's end and its truncated
  episodes, episode statistics, advantages and returns;
- ``update: forward + loss``, ``update: backward``, ``update: optimiser``: the minibatch
  updates (``clip_grad_norm_`` counts with the optimiser);
- ``other``: the rest (logging, learning-rate schedule).

With ``--compile`` (``compile=True`` for the env and PPO) the rollout's steps (policy and
env together) and the minibatch step are compiled calls:
``update: compiled step`` is those calls (a chain of them, ``FusedUpdate.steps``, with its
one write of the parameters at its end), ``update: commit`` writing back a single call's
result (with ``target_kl``), and
``update: indexing and statistics`` the rest of the update loop; the compile (or cache
load) happens in a warm-up rollout before the timed run and is reported apart.

It also counts the torch operators dispatched per env step and per minibatch (with
``torch.profiler``), the number a fused or compiled step would cut.

    python -m benchmarks.ppo_profile                       # CartPole-v1 and Acrobot-v1
    python -m benchmarks.ppo_profile --envs CartPole-v1 --steps 200000
    python -m benchmarks.ppo_profile --compile --name ppo_profile_compiled

Writes ``benchmarks/results/ppo_profile.{json,md}``.
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
MEASURES = ("agents/ppo.py", "agents/base.py", "agents/fused.py", "envs/core.py", "envs/classic/")

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


#: the FusedUpdate methods timed, by phase: a chain of compiled steps (``steps``, PPO without
#: target_kl) commits once at its end, inside its timing; one step (``__call__``) commits apart
FUSED_PHASES = {"__call__": "update: compiled step", "steps": "update: compiled step", "commit": "update: commit"}


def instrument(model: PPO, clock: PhaseClock) -> None:
    """Wrap the model's and its env's methods so that each phase is timed (from outside)."""
    env, optimizer = model.env, model.optimizer

    def timed(owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with clock.phase(phase):
                return original(*args, **kwargs)

        setattr(owner, name, wrapper)

    make_sampler = model._sampler  # the rollout's step of the policy, eager or compiled

    def sampler() -> Any:
        sample = make_sampler()

        def timed_sample(obs: torch.Tensor, noise: torch.Tensor) -> Any:
            with clock.phase("rollout: policy"):
                return sample(obs, noise)

        return timed_sample

    model._sampler = sampler  # type: ignore[method-assign]
    make_steps = model._rollout_steps  # compile=True on an unwrapped env: policy and env steps in one call

    def rollout_steps() -> Any:
        run = make_steps()

        def timed_steps(*args: torch.Tensor) -> Any:
            with clock.phase("rollout: policy and env steps, compiled"):
                return run(*args)

        return timed_steps

    model._rollout_steps = rollout_steps  # type: ignore[method-assign]
    timed(env, "step", "rollout: env step")
    timed(model, "_collect_rollout", "rollout (total)")
    timed(model, "_update", "update (total)")
    timed(optimizer, "step", "update: optimiser")
    from rewardlab.agents.fused import FusedUpdate

    for name, phase in FUSED_PHASES.items():
        original_method = getattr(FusedUpdate, name)

        def method(self: Any, *args: Any, _original: Any = original_method, _phase: str = phase) -> Any:
            with clock.phase(_phase):
                return _original(self, *args)

        setattr(FusedUpdate, name, method)
    original_backward = torch.Tensor.backward

    def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        with clock.phase("update: backward"):
            return original_backward(self, *args, **kwargs)

    torch.Tensor.backward = backward  # type: ignore[method-assign]


def operators_per_call(env_id: str, settings: dict[str, Any]) -> dict[str, int]:
    """Torch operators dispatched by one policy step + env step, and by one minibatch update."""
    num_envs = settings["num_envs"]
    model = PPO(envs.make(env_id, num_envs=num_envs, seed=0), seed=0,
                **{k: v for k, v in settings.items() if k != "num_envs"})
    model.learn(settings["n_steps"] * num_envs)  # allocate and warm up
    obs, _ = model.env.reset()
    with torch.no_grad(), torch.profiler.profile() as step_profile:
        noise = model.policy.draw_noise(model._noise_shape(), model._generator, obs.device)
        actions, _ = model.policy.sample(obs, noise)
        model.env.step(actions)
    update = model.policy.log_prob_and_entropy(obs, actions)[0].mean() + model.policy.value(obs).mean()
    with torch.profiler.profile() as update_profile:
        model.optimizer.zero_grad()
        update.backward()
        torch.nn.utils.clip_grad_norm_(model._parameters, 0.5, foreach=True)
        model.optimizer.step()

    def count(profile: Any) -> int:
        return sum(event.count for event in profile.key_averages() if event.key.startswith("aten::"))

    return {"policy_and_env_step": count(step_profile), "backward_and_optimiser": count(update_profile)}


def profile(env_id: str, steps: int, compile: bool = False) -> dict[str, Any]:
    from rewardlab.agents.fused import FusedUpdate

    settings = dict(OURS[env_id], compile=compile)
    num_envs = settings.pop("num_envs")
    model = PPO(envs.make(env_id, num_envs=num_envs, seed=0, compile=compile), seed=0, **settings)
    warm_up = 0.0
    if compile:  # compile (or load from the cache) outside the timed run
        start = time.perf_counter()
        model.learn(model.n_steps * num_envs)
        warm_up = time.perf_counter() - start
    clock = PhaseClock()
    original_backward = torch.Tensor.backward
    originals = {name: getattr(FusedUpdate, name) for name in FUSED_PHASES}
    try:
        instrument(model, clock)
        start = time.perf_counter()
        model.learn(steps, reset_num_timesteps=not compile)
        total = time.perf_counter() - start
    finally:
        torch.Tensor.backward = original_backward  # type: ignore[method-assign]
        for name, method in originals.items():
            setattr(FusedUpdate, name, method)
    seconds = dict(clock.seconds)
    rollout, update = seconds.pop("rollout (total)"), seconds.pop("update (total)")
    policy, env_step = seconds.get("rollout: policy", 0.0), seconds.get("rollout: env step", 0.0)
    fused = seconds.get("rollout: policy and env steps, compiled", 0.0)
    phases = {
        "rollout: policy": policy,
        "rollout: env step": env_step,
        "rollout: policy and env steps, compiled": fused,
        "rollout: storage": rollout - policy - env_step - fused,
        "update: backward": seconds.get("update: backward", 0.0),
        "update: optimiser": seconds.get("update: optimiser", 0.0),
        "update: compiled step": seconds.get("update: compiled step", 0.0),
        "update: commit": seconds.get("update: commit", 0.0),
    }
    rest = "update: indexing and statistics" if compile else "update: forward + loss"
    phases[rest] = update - sum(v for k, v in phases.items() if k.startswith("update:"))
    phases = {k: v for k, v in phases.items() if v > 0 or k == rest}
    phases["scoring and gae"] = total - rollout - update
    steps_done = model.num_timesteps - (model.n_steps * num_envs if compile else 0)
    return {
        "env_id": env_id, "settings": {"num_envs": num_envs, **settings}, "steps": steps_done, "total_s": total,
        "steps_per_s": steps_done / total, "phases_s": phases, "warm_up_s": warm_up,
        "operators": operators_per_call(env_id, {"num_envs": num_envs, **settings}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1"])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="ppo_profile")
    parser.add_argument("--compile", action="store_true", help="PPO(compile=True): the compiled minibatch update")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [profile(env_id, args.steps, args.compile) for env_id in args.envs]
    machine = describe_machine()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps({"args": recorded_args(args), "machine": machine, "runs": rows}, indent=2) + "\n")
    lines = [
        "# Where PPO's time goes",
        "",
        f"`rewardlab.agents.PPO` with the settings of `benchmarks/ppo_speed.py`, {args.threads} torch thread(s), "
        + (
            "the minibatch update compiled (`compile=True`; warm-up, the first rollout and its update with the "
            "compile or cache load: " + ", ".join(f"{r['env_id']} {r['warm_up_s']:.1f} s" for r in rows) + ")"
            if args.compile else "eager (no compilation)"
        ) + f". Machine: {machine['summary']}.",
        "",
    ]
    for row in rows:
        lines += [
            f"## {row['env_id']}: {row['steps']:,} steps in {row['total_s']:.1f} s ({row['steps_per_s']:,.0f} steps/s)",
            "",
            f"Settings: `{json.dumps(row['settings'])}`. Torch operators dispatched: "
            f"{row['operators']['policy_and_env_step']} per env step (policy and env), "
            f"{row['operators']['backward_and_optimiser']} per minibatch for backward, gradient clipping and Adam.",
            "",
            "| phase | s | share |",
            "|---|---|---|",
            *(f"| {name} | {seconds:.2f} | {seconds / row['total_s']:.0%} |"
              for name, seconds in sorted(row["phases_s"].items(), key=lambda item: -item[1])),
            "",
        ]
    flags = f" --compile --name {args.name}" if args.compile else ""
    lines += [f"Reproduce: `python -m benchmarks.ppo_profile --envs {' '.join(args.envs)} --steps {args.steps}{flags}`.", ""]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
