"""Steps per second of the batched envs next to Gymnasium's and SB3's vector envs, in one run.

For every env and batch size this times, with random actions drawn before the clock starts
(on the env's device for ours, as numpy arrays for the others):

- ours, eager (``rewardlab.envs.make(...)``) and compiled (``rewardlab.envs.make(..., compile=True)``);
- Gymnasium's fastest vector env for the task: its numpy ``vector_entry_point`` where it
  has one (CartPole), else ``SyncVectorEnv``;
- SB3's ``DummyVecEnv`` of Gymnasium envs, up to 1024 envs (beyond, it takes minutes).

The implementations are timed in turns, ``--repeats`` times each, and the median is
reported, so that load from other processes falls on all of them alike. Results go to
``benchmarks/results/env_throughput.json`` and ``.md``.

Usage::

    python benchmarks/env_throughput.py                  # everything (about 10 minutes)
    python benchmarks/env_throughput.py --quick          # 1024 and 4096 envs, shorter timings
    python benchmarks/env_throughput.py --envs CartPole-v1 --num-envs 4096 16384
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import stable_baselines3
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv

from benchmarks.machine import recorded_args
from rewardlab import envs

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("envs/core.py", "envs/classic/", "rewardlab/common/compiled.py")

CLASSIC_IDS = [
    "CartPole-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Acrobot-v1",
    "Pendulum-v1",
]
NUM_ENVS = [1, 64, 1024, 4096, 16384]
QUICK_NUM_ENVS = [1024, 4096]
DUMMY_VEC_ENV_MAX = 1024
ACTION_BATCHES = 32  # distinct pre-drawn action batches, cycled through while timing
RESULTS = Path(__file__).parent / "results" / "env_throughput"


def numpy_actions(space: spaces.Space, num_envs: int, seed: int) -> list[np.ndarray]:
    """``ACTION_BATCHES`` batches of random actions from a single-env ``space``."""
    rng = np.random.default_rng(seed)
    if isinstance(space, spaces.Discrete):
        draws = rng.integers(space.start, space.start + space.n, (ACTION_BATCHES, num_envs))
    else:
        draws = rng.uniform(space.low, space.high, (ACTION_BATCHES, num_envs, *space.shape))
        draws = draws.astype(space.dtype)
    return list(draws)


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Timer:
    """Steps one implementation for a while and reports steps per second.

    :param name: the implementation's label
    :param num_envs: envs stepped per call
    :param step: one step of all envs with the ``index``-th action batch
    :param synchronize: waits for the device (CUDA) before the clock is read
    """

    def __init__(
        self,
        name: str,
        num_envs: int,
        step: Callable[[int], Any],
        synchronize: Callable[[], None] = lambda: None,
    ):
        self.name = name
        self.num_envs = num_envs
        self.step = step
        self.synchronize = synchronize
        self.rates: list[float] = []

    def run(self, min_seconds: float, min_steps: int = 3) -> None:
        """Time steps until ``min_seconds`` have passed (and at least ``min_steps``).

        :param min_seconds: the least wall time to measure
        :param min_steps: the fewest steps to measure
        """
        steps = 0
        self.synchronize()
        start = time.perf_counter()
        while True:
            self.step(steps % ACTION_BATCHES)
            steps += 1
            if steps >= min_steps and time.perf_counter() - start >= min_seconds:
                self.synchronize()
                break
        self.rates.append(steps * self.num_envs / (time.perf_counter() - start))

    @property
    def median(self) -> float:
        return statistics.median(self.rates)


def our_timer(env: envs.BatchedEnv, name: str) -> tuple[Timer, float]:
    """A timer for one of our envs, and the seconds its first step took (the compile, if any)."""
    env.reset(seed=0)
    actions = [
        torch.as_tensor(batch, device=env.device)
        for batch in numpy_actions(env.single_action_space, env.num_envs, seed=1)
    ]
    synchronize = torch.cuda.synchronize if env.device.type == "cuda" else (lambda: None)
    start = time.perf_counter()
    env.step(actions[0])
    synchronize()
    first_step = time.perf_counter() - start
    return Timer(name, env.num_envs, lambda i: env.step(actions[i]), synchronize), first_step


def compiled_agreement(eager: envs.BatchedEnv, compiled: envs.BatchedEnv) -> dict[str, Any]:
    """Step both from the same seed with the same actions for 100 steps and compare.

    Compiled code may round differently (fused multiply-adds), so observations agree to
    float32 rounding and the episode flags agree unless a state lands within that rounding
    of a termination threshold.
    """
    actions = numpy_actions(eager.single_action_space, eager.num_envs, seed=2)
    eager.reset(seed=3)
    compiled.reset(seed=3)
    worst, flags_differ = 0.0, 0
    for step in range(100):
        batch = torch.as_tensor(actions[step % ACTION_BATCHES], device=eager.device)
        expected, got = eager.step(batch), compiled.step(batch)
        worst = max(worst, float((expected[0] - got[0]).abs().max()))
        flags_differ += int((expected[2] != got[2]).sum() + (expected[3] != got[3]).sum())
    return {"max_abs_obs_difference": worst, "episode_flags_differing": flags_differ}


def gymnasium_timer(env_id: str, num_envs: int) -> tuple[Timer, str]:
    """A timer for Gymnasium's fastest vector env of ``env_id``, and which one it is."""
    mode = "vector_entry_point" if gymnasium.spec(env_id).vector_entry_point else "sync"
    vec = gymnasium.make_vec(env_id, num_envs, vectorization_mode=mode)
    vec.reset(seed=0)
    actions = numpy_actions(vec.single_action_space, num_envs, seed=1)
    kind = type(vec.unwrapped).__name__
    return Timer("gymnasium", num_envs, lambda i: vec.step(actions[i])), kind


def dummy_vec_env_timer(env_id: str, num_envs: int) -> Timer:
    """A timer for SB3's ``DummyVecEnv`` of ``num_envs`` Gymnasium envs."""
    vec = DummyVecEnv([lambda: gymnasium.make(env_id)] * num_envs)
    vec.seed(0)
    vec.reset()
    actions = numpy_actions(vec.action_space, num_envs, seed=1)
    return Timer("sb3 DummyVecEnv", num_envs, lambda i: vec.step(actions[i]))


def benchmark(
    env_id: str,
    num_envs: int,
    device: torch.device,
    compile_too: bool,
    repeats: int,
    min_seconds: float,
) -> dict[str, Any]:
    """Time every implementation of ``env_id`` at ``num_envs``, in turns."""
    row: dict[str, Any] = {"env_id": env_id, "num_envs": num_envs}
    eager_env = envs.make(env_id, num_envs, device=device)
    timers = [our_timer(eager_env, "ours, eager")[0]]
    if compile_too:
        compiled_env = envs.make(env_id, num_envs, device=device, compile=True)
        timer, row["compile_seconds"] = our_timer(compiled_env, "ours, compiled")
        timers.append(timer)
        # a second env of the same id and size: its first step loads the library compiled above
        row["cached_load_seconds"] = our_timer(
            envs.make(env_id, num_envs, device=device, compile=True), "ours, compiled again"
        )[1]
        row["compiled_vs_eager"] = compiled_agreement(eager_env, compiled_env)
    reference, row["gymnasium_kind"] = gymnasium_timer(env_id, num_envs)
    timers.append(reference)
    if num_envs <= DUMMY_VEC_ENV_MAX:
        timers.append(dummy_vec_env_timer(env_id, num_envs))
    row.update(time_in_turns(timers, repeats, min_seconds))
    return row


def time_in_turns(timers: list[Timer], repeats: int, seconds: float) -> dict[str, Any]:
    """Warm each timer up, then run them in turns ``repeats`` times for ``seconds`` each (so
    that a change in the machine's load falls on every implementation alike), and close those
    that hold processes.

    :return: ``steps_per_second`` (each timer's median) and ``all_rates``, by timer name
    """
    for timer in timers:
        timer.run(min_seconds=0.05, min_steps=2)  # warm-up
        timer.rates.clear()
    for _ in range(repeats):
        for timer in timers:
            timer.run(seconds, min_steps=2)
    for timer in timers:
        if hasattr(timer, "close"):
            timer.close()
    return {
        "steps_per_second": {timer.name: timer.median for timer in timers},
        "all_rates": {timer.name: timer.rates for timer in timers},
    }


def ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or denominator is None:
        return "–"
    return f"{numerator / denominator:.2f}x"


def rate(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.1f}k"


def markdown(rows: list[dict[str, Any]], machine: dict[str, Any]) -> str:
    """The results as a markdown table per env."""
    lines = [
        "# Batched env throughput",
        "",
        "Steps per second (env steps, i.e. batch size x calls) with random actions drawn "
        "before timing; median of the repeats, implementations timed in turns. "
        "`vs gym` divides by Gymnasium's fastest vector env for the task "
        "(its numpy `vector_entry_point` where it has one, else `SyncVectorEnv`). "
        f"SB3 `DummyVecEnv` is skipped above {DUMMY_VEC_ENV_MAX} envs (minutes per point). "
        "`compile (s)` is the first compiled step, compiling into the run's empty cache; `load (s)` the first "
        "step of a second env of the same id and size, which loads it from the cache; `compiled vs eager` steps both 100 times "
        "from one seed with the same actions: the compiled step rounds differently (fused "
        "multiply-adds, vectorized sin/cos), and CartPole's difference grows along an episode "
        "because the upright pole is unstable (see tests/test_envs_classic.py). The machine "
        "is shared: other processes load it, so absolute rates move between runs; the ratios "
        "come from implementations timed in turns.",
        "",
        f"Machine: {machine['cpu']} ({machine['processor']}), {machine['cpu_count']} CPUs, "
        f"torch {machine['torch']} on {machine['device']} with {machine['torch_threads']} "
        f"thread(s), gymnasium {machine['gymnasium']}, stable-baselines3 "
        f"{machine['stable_baselines3']}, numpy {machine['numpy']}; load average "
        f"{machine['load_average_before']} before, {machine['load_average_after']} after.",
        "",
    ]
    for env_id in dict.fromkeys(row["env_id"] for row in rows):
        env_rows = [row for row in rows if row["env_id"] == env_id]
        kind = env_rows[0]["gymnasium_kind"]
        lines += [
            f"## {env_id}",
            "",
            f"| envs | ours eager | ours compiled | gymnasium {kind} | SB3 DummyVecEnv "
            "| eager vs gym | compiled vs gym | compile (s) | load (s) | compiled vs eager |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for row in env_rows:
            rates = row["steps_per_second"]
            eager, compiled = rates.get("ours, eager"), rates.get("ours, compiled")
            gym, dummy = rates.get("gymnasium"), rates.get("sb3 DummyVecEnv")
            compile_seconds, load_seconds = row.get("compile_seconds"), row.get("cached_load_seconds")
            agreement = row.get("compiled_vs_eager")
            agreement_text = (
                "–"
                if agreement is None
                else f"max Δobs {agreement['max_abs_obs_difference']:.1e}, "
                f"{agreement['episode_flags_differing']} flags differ"
            )
            lines.append(
                f"| {row['num_envs']} | {rate(eager)} | {rate(compiled)} | {rate(gym)} "
                f"| {rate(dummy)} | {ratio(eager, gym)} | {ratio(compiled, gym)} "
                f"| {'–' if compile_seconds is None else f'{compile_seconds:.1f}'} "
                f"| {'–' if load_seconds is None else f'{load_seconds:.2f}'} "
                f"| {agreement_text} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=CLASSIC_IDS, choices=CLASSIC_IDS)
    parser.add_argument("--num-envs", nargs="+", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="1024 and 4096 envs, short timings")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled variant")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="per timing (default 0.3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="the process's torch threads (default 1: numpy runs on one; on a shared two-core "
        "machine a second thread mostly waits); rewardlab's envs step at their own threads "
        "setting, 1, whatever this is (benchmarks/threads_under_load.py times both)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results path, no suffix")
    args = parser.parse_args(argv)
    # compile=True's library cache, empty for this run: "compile (s)" is a compile
    os.environ["REWARDLAB_CACHE"] = tempfile.mkdtemp(prefix="env-throughput-cache-")
    num_envs = args.num_envs or (QUICK_NUM_ENVS if args.quick else NUM_ENVS)
    repeats = args.repeats or (2 if args.quick else 3)
    seconds = args.seconds or (0.15 if args.quick else 0.3)
    torch.set_num_threads(args.threads)
    device = envs.core.resolve_device(args.device)

    machine = {
        "cpu": cpu_name(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
        "gymnasium": gymnasium.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "numpy": np.__version__,
        "load_average_before": [round(load, 2) for load in os.getloadavg()],
    }
    rows = []
    started = time.perf_counter()
    for env_id in args.envs:
        for count in num_envs:
            row = benchmark(env_id, count, device, not args.no_compile, repeats, seconds)
            rows.append(row)
            rates = row["steps_per_second"]
            print(
                f"{env_id:26s} {count:6d} envs  "
                + "  ".join(f"{name}: {rate(value)}" for name, value in rates.items())
                + f"  compiled/gym {ratio(rates.get('ours, compiled'), rates['gymnasium'])}",
                flush=True,
            )
    machine["load_average_after"] = [round(load, 2) for load in os.getloadavg()]
    machine["wall_seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine, "settings": recorded_args(args) | {"num_envs": num_envs}, "rows": rows}
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rows, machine))
    print(markdown(rows, machine))


if __name__ == "__main__":
    main()
