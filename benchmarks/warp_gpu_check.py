"""The batched MuJoCo envs on a CUDA GPU: the Warp backend's correctness and speed, in one short run.

A prepared check for a borrowed GPU machine (about 5 minutes on one GPU, most of it
compiling MuJoCo Warp's kernels the first time). In order, each part written to the results
as soon as it is done, so that a run cut short keeps what it measured:

1. ``cuda path``: ``rewardlab.envs.make(env_id, device="cuda", backend="warp")`` and
   ``backend="cpu"`` (``mujoco.batch``, tensors moved to the GPU) from the same seed, the
   same random actions: every output on the GPU, and how far the two are apart over the
   first steps, compared as ``tests/test_envs_mujoco_warp.py`` does on the CPU (HalfCheetah
   over 5 steps, Hopper over 50 with its terminations and partial resets);
2. ``throughput``: env steps per second of the Warp backend on HalfCheetah-v5 and Ant-v5
   at 4096 and 16384 envs, with random actions drawn on the GPU before the clock starts,
   warm-up excluded, the GPU synchronised before the clock is read; beside it the bare
   physics (``env.backend.step`` alone, no observations, rewards or resets);
3. ``ppo``: ``rewardlab.agents.PPO`` on HalfCheetah-v5 with 4096 Warp envs, env steps per second of a
   short ``learn`` (rollouts and updates), after a first iteration left out of the clock;
0. ``compiled ppo`` (first, and without MuJoCo Warp): PPO with ``compile=True`` and a
   compiled CartPole-v1 on the GPU against eager, from one seed: the largest parameter
   difference after one iteration, the compile (or cache load) time, and env steps per
   second of each at ``--cartpole-envs`` envs (compiled, PPO's rollout runs 8 steps of the
   policy and the env's step in one compiled call, on the GPU as on the CPU); then the same
   for MountainCar-v0 under ``BatchedPotentialShaping`` (the shaping step compiled in too).

Results go to ``benchmarks/results/mujoco_warp_gpu.json`` and ``.md`` and, when ``$OUT``
is set, to ``$OUT/mujoco_warp_gpu.json`` and ``.md`` as well. Without a CUDA device it
says so and exits with status 2; without ``mujoco-warp`` it runs part 0 only.

Usage::

    python -m benchmarks.warp_gpu_check
    python -m benchmarks.warp_gpu_check --num-envs 4096 --seconds 1 --budget 120
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

#: the code whose figures this benchmark measures (see benchmarks/freshness.py)
MEASURES = ("envs/mujoco/",)

RESULTS = Path(__file__).parent / "results" / "mujoco_warp_gpu"
DEVICE = "cuda"
THROUGHPUT_IDS = ["HalfCheetah-v5", "Ant-v5"]
# (env id, steps compared): the horizons of tests/test_envs_mujoco_warp.py, where float32
# drift stays far below the tolerance; the drift after 20 steps is reported too.
PARITY = [("HalfCheetah-v5", 5), ("Hopper-v5", 50)]
PARITY_NUM_ENVS = 64
TOLERANCE = 1e-3  # on |warp - cpu| / (1 + |cpu|), as rtol = atol = 1e-3
ACTION_BATCHES = 16


def random_actions(env: Any, seed: int, batches: int = ACTION_BATCHES) -> list[torch.Tensor]:
    """``batches`` batches of uniform random actions in the env's range, on its device."""
    generator = torch.Generator(env.device).manual_seed(seed)
    low = torch.as_tensor(env.single_action_space.low, device=env.device)
    high = torch.as_tensor(env.single_action_space.high, device=env.device)
    shape = (env.num_envs, *low.shape)
    draws = [torch.rand(shape, generator=generator, device=env.device) for _ in range(batches)]
    return [low + draw * (high - low) for draw in draws]


def scaled_difference(warp_value: torch.Tensor, cpu_value: torch.Tensor) -> torch.Tensor:
    """Per env, max ``|warp - cpu| / (1 + |cpu|)`` over the trailing dimensions."""
    difference = (warp_value - cpu_value).abs() / (1 + cpu_value.abs())
    return difference.reshape(len(difference), -1).max(dim=1).values


def parity(env_id: str, steps: int, num_envs: int) -> dict[str, Any]:
    """Step the Warp and the CPU backend side by side on CUDA; where outputs live, how far apart.

    Per env the largest difference of observations and reward terms over the first ``steps``
    steps. Now and then a contact that starts within rounding of its threshold sends one
    episode its own way (about once in 10^4 env steps of Hopper), so the two agree when the
    median env is within the tolerance, at most one env in 50 drifts beyond it, and the
    episode flags differ only in those.
    """
    from rewardlab import envs

    start = time.perf_counter()
    warp_env = envs.make(env_id, num_envs, seed=3, device=DEVICE, backend="warp")
    torch.cuda.synchronize()
    warp_make_seconds = round(time.perf_counter() - start, 2)
    cpu_env = envs.make(env_id, num_envs, seed=3, device=DEVICE, backend="cpu")
    warp_obs, _ = warp_env.reset()
    cpu_obs, _ = cpu_env.reset()
    devices = {str(warp_obs.device), str(warp_env.backend.qpos.device)}
    worst = scaled_difference(warp_obs, cpu_obs)
    flags_differ = torch.zeros(num_envs, dtype=torch.bool, device=warp_obs.device)
    endings = 0
    drift = {}
    actions = random_actions(cpu_env, seed=0, batches=max(steps, 20))
    for step in range(max(steps, 20)):
        warp_obs, _, warp_terminated, warp_truncated, warp_info = warp_env.step(actions[step])
        cpu_obs, _, cpu_terminated, cpu_truncated, cpu_info = cpu_env.step(actions[step])
        outputs = [warp_obs, warp_terminated, warp_truncated, warp_info["final_obs"]]
        outputs += list(warp_info["reward_components"].values())
        devices |= {str(tensor.device) for tensor in outputs}
        pairs = [(warp_obs, cpu_obs), (warp_info["final_obs"], cpu_info["final_obs"])]
        pairs += [
            (warp_info["reward_components"][name], value)
            for name, value in cpu_info["reward_components"].items()
        ]
        difference = torch.stack([scaled_difference(*pair) for pair in pairs]).max(dim=0).values
        if step < steps:
            worst = torch.maximum(worst, difference)
            flags_differ |= (warp_terminated != cpu_terminated) | (warp_truncated != cpu_truncated)
            endings += int(cpu_terminated.sum())
        if step + 1 in (1, 5, 10, 20):
            drift[step + 1] = float(difference.median())
    beyond = worst > TOLERANCE
    median = float(worst.median())
    return {
        "env_id": env_id,
        "num_envs": num_envs,
        "steps_compared": steps,
        "backends": [type(warp_env.backend).__name__, type(cpu_env.backend).__name__],
        "warp_make_seconds": warp_make_seconds,
        "output_devices": sorted(devices),
        "all_outputs_on_cuda": all(device.startswith("cuda") for device in devices),
        "median_env_max_difference": median,
        "max_difference": float(worst.max()),
        "envs_beyond_tolerance": int(beyond.sum()),
        "envs_with_flags_differing": int(flags_differ.sum()),
        "terminations_compared": endings,
        "median_difference_after_steps": drift,
        "agrees": median <= TOLERANCE
        and int(beyond.sum()) <= max(1, num_envs // 50)
        and not bool((flags_differ & ~beyond).any()),
    }


class Clock:
    """Runs ``step(index)`` for at least ``seconds`` (and ``min_calls``), the GPU synchronised."""

    def __init__(self, step: Callable[[int], Any], seconds: float, min_calls: int = 10):
        self.step, self.seconds, self.min_calls = step, seconds, min_calls

    def calls_per_second(self) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        calls = 0
        while calls < self.min_calls or time.perf_counter() - start < self.seconds:
            self.step(calls % ACTION_BATCHES)
            calls += 1
        torch.cuda.synchronize()
        return calls / (time.perf_counter() - start)


def throughput(env_id: str, num_envs: int, seconds: float) -> dict[str, Any]:
    """Env steps per second of the Warp backend, full ``step`` and the bare physics."""
    from rewardlab import envs

    start = time.perf_counter()
    env = envs.make(env_id, num_envs, seed=0, device=DEVICE, backend="warp")
    env.reset(seed=0)
    torch.cuda.synchronize()
    make_seconds = time.perf_counter() - start
    actions = random_actions(env, seed=1)
    controls = [batch.to(torch.float64) for batch in actions]
    env_clock = Clock(lambda index: env.step(actions[index]), seconds)
    physics_clock = Clock(lambda index: env.backend.step(controls[index], env.frame_skip), seconds)
    for clock in (env_clock, physics_clock):  # warm-up: first launches, allocator
        Clock(clock.step, seconds=0.2, min_calls=5).calls_per_second()
    env_rate = env_clock.calls_per_second() * num_envs
    physics_rate = physics_clock.calls_per_second() * num_envs
    free, total = torch.cuda.mem_get_info()  # Warp's arrays are not in torch's allocator
    return {
        "env_id": env_id,
        "num_envs": num_envs,
        "make_and_reset_seconds": round(make_seconds, 2),
        "env_steps_per_second": env_rate,
        "physics_steps_per_second": physics_rate,
        "gpu_memory_in_use_gib": round((total - free) / 2**30, 2),
    }


def ppo_speed(num_envs: int, iterations: int) -> dict[str, Any]:
    """``rewardlab.agents.PPO`` on HalfCheetah-v5 with Warp envs: env steps per second of ``learn``."""
    from rewardlab import envs
    from rewardlab.agents import PPO
    from rewardlab.agents.ppo import MUJOCO_CONFIG

    # MUJOCO_CONFIG suit 16 envs; with thousands, short rollouts and a few large
    # minibatches keep one update in the same range of samples per gradient step.
    n_steps = 16
    settings = {
        **MUJOCO_CONFIG.to_dict(),
        "n_steps": n_steps,
        "batch_size": n_steps * num_envs // 4,
        "n_epochs": 4,
    }
    env = envs.make("HalfCheetah-v5", num_envs, seed=0, device=DEVICE, backend="warp")
    model = PPO(env, seed=0, **settings)
    rollout = n_steps * num_envs
    start = time.perf_counter()
    model.learn(rollout)  # the first iteration (kernels, allocator, optimiser) is not timed
    torch.cuda.synchronize()
    first_seconds = time.perf_counter() - start
    before = model.num_timesteps
    start = time.perf_counter()
    model.learn(iterations * rollout, reset_num_timesteps=False)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    steps = model.num_timesteps - before
    return {
        "env_id": "HalfCheetah-v5",
        "num_envs": num_envs,
        "settings": settings,
        "timed_env_steps": steps,
        "first_iteration_seconds": round(first_seconds, 2),
        "seconds": round(seconds, 2),
        "env_steps_per_second": steps / seconds,
    }


def compiled_ppo(num_envs: int, iterations: int, shaped: bool = False) -> dict[str, Any]:
    """PPO(compile=True) on CartPole-v1 on the GPU against eager: parity and speed. ``shaped``:
    MountainCar-v0 under ``BatchedPotentialShaping`` with our energy potential instead, whose
    step the compiled rollout runs with the env's."""
    from rewardlab import envs
    from rewardlab.agents import PPO
    from rewardlab.shaping import BatchedPotentialShaping, potentials

    if shaped:
        env_id = "MountainCar-v0"
        settings: dict[str, Any] = dict(n_steps=8, n_epochs=4, learning_rate=1e-3, normalize_obs=True,
                                        normalize_reward=True)
    else:
        env_id = "CartPole-v1"
        settings = dict(n_steps=32, n_epochs=4, learning_rate=3e-3, gamma=0.98, gae_lambda=0.8)
    models, row = {}, {"env_id": env_id, "shaped": shaped, "num_envs": num_envs}
    for compiled in (False, True):
        start = time.perf_counter()
        env = envs.make(env_id, num_envs, seed=0, device=DEVICE, compile=compiled and not shaped)
        if shaped:
            env = BatchedPotentialShaping(env, potentials.for_env(env_id), gamma=0.99)
        model = PPO(env, seed=0, compile=compiled, **settings)
        model.warm_up()
        model.learn(model.n_steps * num_envs)  # one iteration: the env's compile happens here
        torch.cuda.synchronize()
        row[f"{'compiled' if compiled else 'eager'}_first_iteration_seconds"] = round(
            time.perf_counter() - start, 2
        )
        models[compiled] = model
    row["rollout_compiled"] = models[True]._compiled.calls.get("rollout") is not None
    row["max_parameter_difference_after_one_iteration"] = max(
        float((a - b).detach().abs().max())
        for a, b in zip(models[False].policy.parameters(), models[True].policy.parameters(), strict=True)
    )
    for compiled, model in models.items():
        before, start = model.num_timesteps, time.perf_counter()
        model.learn(iterations * model.n_steps * num_envs, reset_num_timesteps=False)
        torch.cuda.synchronize()
        row[f"{'compiled' if compiled else 'eager'}_env_steps_per_second"] = (
            (model.num_timesteps - before) / (time.perf_counter() - start)
        )
    return row


def rate(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.1f}k"


def markdown(report: dict[str, Any]) -> str:
    """The report as markdown: the machine, then one table per part."""
    machine = report["machine"]
    lines = [
        "# Batched MuJoCo envs on a GPU: the Warp backend",
        "",
        f"Machine: {machine['summary']}; warp {machine['warp']}, mujoco-warp "
        f"{machine['mujoco_warp']}, mujoco {machine['mujoco']}. Written by "
        "`benchmarks/warp_gpu_check.py`.",
        "",
        "## CUDA path: Warp backend against the CPU backend",
        "",
        f"Same seed and actions, {PARITY_NUM_ENVS} envs, both on `device='cuda'`. An env's "
        "difference is its largest |warp - cpu| / (1 + |cpu|) over observations and reward "
        "terms in the steps compared, horizons where float32 drift stays small (HalfCheetah's "
        f"contacts amplify it within a few steps). `agrees`: the median env within {TOLERANCE:g}, "
        "at most one env in 50 beyond it (a contact starting within rounding of its threshold "
        "now and then sends one episode its own way) and episode flags differing only there.",
        "",
        "| env | steps | outputs on cuda | median env | worst env | envs beyond | envs with "
        "flags differing | terminations | median after 20 steps | agrees | make s (warp) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for row in report["cuda_path"]:
        if "error" in row:
            lines.append(f"| {row['env_id']} | error: {row['error']} |||||||||")
            continue
        lines.append(
            f"| {row['env_id']} | {row['steps_compared']} | {row['all_outputs_on_cuda']} "
            f"| {row['median_env_max_difference']:.1e} | {row['max_difference']:.1e} "
            f"| {row['envs_beyond_tolerance']} | {row['envs_with_flags_differing']} "
            f"| {row['terminations_compared']} "
            f"| {row['median_difference_after_steps'][20]:.1e} "
            f"| {row['agrees']} | {row['warp_make_seconds']} |"
        )
    lines += [
        "",
        "## Throughput of the Warp backend",
        "",
        "Env steps per second (envs x calls), random actions drawn on the GPU beforehand, "
        "warm-up excluded, GPU synchronised. `physics` is `env.backend.step` alone (no "
        "observations, rewards or resets). `make s` includes compiling kernels the first "
        "time a model is used.",
        "",
        "| env | envs | env steps/s | physics steps/s | make s | GPU GiB in use |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["throughput"]:
        if "error" in row:
            lines.append(f"| {row['env_id']} | {row['num_envs']} | error: {row['error']} ||||")
            continue
        lines.append(
            f"| {row['env_id']} | {row['num_envs']} | {rate(row['env_steps_per_second'])} "
            f"| {rate(row['physics_steps_per_second'])} | {row['make_and_reset_seconds']} "
            f"| {row['gpu_memory_in_use_gib']} |"
        )
    lines += ["", "## PPO compiled on the GPU (CartPole-v1)", "", _part(report.get("compiled_ppo"), _compiled_line)]
    lines += ["", "## PPO compiled on the GPU, shaped (MountainCar-v0 with our energy potential)", "",
              _part(report.get("compiled_shaped_ppo"), _compiled_line)]
    lines += ["", "## PPO on Warp envs", "", _part(report.get("ppo"), _ppo_line)]
    if report["skipped"]:
        lines += ["", f"Skipped (out of the time budget): {', '.join(report['skipped'])}."]
    return "\n".join(lines) + "\n"


def _part(result: dict[str, Any] | None, describe: Callable[[dict[str, Any]], str]) -> str:
    """One part's sentence: not run, its error, or what it measured."""
    if result is None:
        return "Not run."
    if "error" in result:
        return f"Error: {result['error']}"
    return describe(result)


def _compiled_line(compiled: dict[str, Any]) -> str:
    return (
        f"{compiled['num_envs']} envs, `compile=True` for the env and PPO against eager, one seed "
        f"(rollout compiled with the env's step: {compiled.get('rollout_compiled', '-')}): "
        f"parameters differ by at most {compiled['max_parameter_difference_after_one_iteration']:.1e} "
        f"after one iteration; first iteration (with the compile or cache load) "
        f"{compiled['compiled_first_iteration_seconds']} s against {compiled['eager_first_iteration_seconds']} s; "
        f"{rate(compiled['compiled_env_steps_per_second'])} env steps/s against "
        f"{rate(compiled['eager_env_steps_per_second'])} eager."
    )


def _ppo_line(ppo: dict[str, Any]) -> str:
    settings = ppo["settings"]
    return (
        f"`rewardlab.agents.PPO` on {ppo['env_id']}, {ppo['num_envs']} envs, n_steps "
        f"{settings['n_steps']}, batch_size {settings['batch_size']}, n_epochs "
        f"{settings['n_epochs']}: {rate(ppo['env_steps_per_second'])} env steps/s over "
        f"{ppo['timed_env_steps']} steps ({ppo['seconds']} s; the first iteration, "
        f"{ppo['first_iteration_seconds']} s, not timed)."
    )


def write(report: dict[str, Any], out: Path) -> None:
    """Write the report next to the other results, and under ``$OUT`` when it is set."""
    targets = [out]
    if os.environ.get("OUT"):
        targets.append(Path(os.environ["OUT"]) / out.name)
    text = json.dumps(report, indent=2, default=str) + "\n"
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.with_suffix(".json").write_text(text)
        target.with_suffix(".md").write_text(markdown(report))


def attempt(
    label: dict[str, Any], part: Callable[..., dict[str, Any]], *args: Any
) -> dict[str, Any]:
    """``part(*args)``; a failure is recorded under ``label`` with its message, and the run goes on."""
    try:
        return part(*args)
    except Exception as error:  # noqa: BLE001 - a one-shot run keeps going and records it
        traceback.print_exc()
        return {**label, "error": f"{type(error).__name__}: {error}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[4096, 16384])
    parser.add_argument("--seconds", type=float, default=2.0, help="per throughput timing")
    parser.add_argument("--ppo-envs", type=int, default=4096)
    parser.add_argument("--cartpole-envs", type=int, default=4096, help="envs of the compiled-PPO part")
    parser.add_argument("--ppo-iterations", type=int, default=3, help="timed PPO iterations")
    parser.add_argument(
        "--budget", type=float, default=270.0, help="seconds; parts not begun by then are skipped"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results path, no suffix")
    args = parser.parse_args(argv)

    if not torch.cuda.is_available():
        print(
            "warp_gpu_check: no CUDA device here (torch.cuda.is_available() is False); "
            "run it on a machine with an NVIDIA GPU and a CUDA build of torch",
            file=sys.stderr,
        )
        return 2
    from benchmarks.machine import describe_machine, recorded_args

    has_warp = importlib.util.find_spec("mujoco_warp") is not None
    started = time.perf_counter()
    report: dict[str, Any] = {
        "machine": {**describe_machine(), "torch_cuda": torch.version.cuda,
                    "warp": "-", "mujoco_warp": "-", "mujoco": "-"},
        "args": recorded_args(args),
        "compiled_ppo": None,
        "compiled_shaped_ppo": None,
        "cuda_path": [],
        "throughput": [],
        "ppo": None,
        "skipped": [],
    }

    def in_budget(name: str) -> bool:
        if time.perf_counter() - started < args.budget:
            print(f"[{time.perf_counter() - started:6.1f} s] {name}", flush=True)
            return True
        report["skipped"].append(name)
        return False

    if in_budget(f"compiled ppo {args.cartpole_envs}"):
        report["compiled_ppo"] = attempt({}, compiled_ppo, args.cartpole_envs, 5)
        print(json.dumps(report["compiled_ppo"], default=str), flush=True)
        write(report, args.out)
    if in_budget(f"compiled shaped ppo {args.cartpole_envs}"):
        report["compiled_shaped_ppo"] = attempt({}, compiled_ppo, args.cartpole_envs, 5, shaped=True)
        print(json.dumps(report["compiled_shaped_ppo"], default=str), flush=True)
        write(report, args.out)
    if not has_warp:
        report["skipped"].append("the MuJoCo Warp parts (mujoco_warp is not installed: "
                                 "pip install 'rewardlab[mujoco-warp]')")
        write(report, args.out)
        print(markdown(report))
        return 0

    import mujoco
    import mujoco_warp
    import warp

    warp.config.log_level = warp.LOG_WARNING  # no line per kernel module loaded
    report["machine"] |= {"warp": warp.__version__, "mujoco_warp": mujoco_warp.__version__,
                          "mujoco": mujoco.__version__}

    for env_id, steps in PARITY:
        if in_budget(f"cuda path {env_id}"):
            row = attempt({"env_id": env_id}, parity, env_id, steps, PARITY_NUM_ENVS)
            report["cuda_path"].append(row)
            print(json.dumps(row, default=str), flush=True)
            write(report, args.out)
    for env_id in THROUGHPUT_IDS:
        for num_envs in args.num_envs:
            if in_budget(f"throughput {env_id} {num_envs}"):
                label = {"env_id": env_id, "num_envs": num_envs}
                row = attempt(label, throughput, env_id, num_envs, args.seconds)
                report["throughput"].append(row)
                print(json.dumps(row, default=str), flush=True)
                write(report, args.out)
    if in_budget(f"ppo {args.ppo_envs}"):
        report["ppo"] = attempt({}, ppo_speed, args.ppo_envs, args.ppo_iterations)
        print(json.dumps(report["ppo"], default=str), flush=True)
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    write(report, args.out)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    if not __package__:  # run as a file (python benchmarks/warp_gpu_check.py): find envs, agents
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
