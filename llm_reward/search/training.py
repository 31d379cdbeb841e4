"""Train PPO on a reward program and measure the task's true fitness along the way.

:func:`train_program` is the training loop (one seed, in this process);
:func:`evaluation_job` is the sandboxed job :func:`rewardlab.llm_reward.evaluate` runs: it trains
every seed on the rewards its companion (:func:`reward_companion`, the only process that
loads the program) answers, and reports plain JSON data.

Fitness is never the program's own reward: at each checkpoint the current policy plays
``eval_episodes`` episodes (deterministic actions) on a separate, unwrapped env and the
mean of their true returns is the fitness; where the env's description has a success
rule, the share of successful episodes is reported too. In the sandbox the worker does
not measure: it ships each checkpoint's policy as plain arrays (:func:`policy_snapshot`)
and the caller, a process that never loaded the program, measures it
(:func:`measure_snapshot`), so a program cannot change the score it gets. Each checkpoint also holds the
mean per step of every reward component (``"extrinsic"`` and ``"program/<name>"``) and of
the reward trained on (the program's own), and the true return of the training episodes
that finished since the previous checkpoint.
"""

from __future__ import annotations

import base64
import gc
import importlib.util
import json
import os
import resource
import socket
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from rewardlab import envs
from rewardlab.agents.evaluation import play_episodes
from rewardlab.agents.ppo import PPO
from rewardlab.common import compiled
from rewardlab.envs.description_files import use_description
from rewardlab.envs.descriptions import EnvDescription, describe
from rewardlab.llm_reward.programs.program import (
    ProgramError,
    RewardFunction,
    RewardProgram,
    program_traceback,
)
from rewardlab.llm_reward.programs.wrapper import COMPONENT_PREFIX
from rewardlab.llm_reward.sandbox.guard import Guard
from rewardlab.llm_reward.sandbox.reward_process import RemoteReward, serve_rewards

__all__ = ["Checkpoint", "compiled_warm_up", "evaluate_policy", "evaluation_job", "load_snapshot", "measure_snapshot",
           "partial_result", "reward_companion",
           "policy_snapshot", "train_program", "warm_compiled"]

# Imported by the worker before its guard is installed: PPO's optimiser imports
# torch._dynamo on first use, which replaces torch.manual_seed (the guard's snapshot must
# come after); TensorBoard's import chain calls ctypes, which the guard refuses, and so
# does MuJoCo's (it loads its plugins with ctypes and probes GLFW in a subprocess), when
# the mujoco extra is installed.
_MUJOCO = ("mujoco",) if importlib.util.find_spec("mujoco") is not None else ()
PRELOAD = ("torch._dynamo", "torch.utils.tensorboard", *_MUJOCO)


def preload_for(env_id: str) -> tuple[str, ...]:
    """:data:`PRELOAD` and what the env needs: a ``"module:Env-v0"`` id's module (a user's
    own file, imported by the fork server, whose folder the worker then cannot read: only the
    module itself), ``minigrid`` for MiniGrid ids.

    :raises ValueError: the env's module cannot be imported.
    """
    from rewardlab.envs.gymnasium_env import ID_PACKAGES, env_module, import_env_module

    import_env_module(env_id)
    module = env_module(env_id)
    extra = [package for prefix, (packages, _) in ID_PACKAGES.items() if env_id.startswith(prefix)
             for package in packages]
    if module is not None:
        extra.append(module)
    return (*PRELOAD, *extra)


def describe_for(payload: dict[str, Any]) -> EnvDescription:
    """The description a worker's payload names: a file's (its data travels in the payload) or the env's."""
    if payload.get("description"):
        return use_description(payload["description"])
    return describe(payload["env_id"])

_REWARD_PREFIX = "reward/"


# ------------------------------------------- PPO's compiled graphs in the sandbox
# A sandboxed worker cannot read the compile cache, and PPO's compiled graphs do not
# depend on the reward program: the fork server (trusted, before any worker exists) loads
# them for the budget at hand, compiling them into the cache the first time, and every
# worker it forks inherits them (rewardlab.common.compiled.loaded_only).
#: what warm_compiled made of each argument in this process (the fork server; the workers
#: inherit it): "" when the graphs are loaded, else why not
_WARMED: dict[str, str] = {}


def compiled_warm_up(payload: Mapping[str, Any], threads: int) -> tuple[Callable[[str], None], str]:
    """The fork server's warm-up (``run_sandboxed``'s ``warm``) that loads PPO's compiled
    graphs for an evaluation payload with ``ppo_kwargs["compile"]``.

    :param payload: the evaluation job's payload (env, envs, device, PPO settings).
    :param threads: the worker's torch threads (part of a compiled CPU kernel).
    """
    spec = {
        "env_id": payload["env_id"], "description": payload.get("description"),
        "num_envs": payload["num_envs"], "device": payload["device"],
        "ppo_kwargs": payload["ppo_kwargs"], "threads": threads,
        "cache": os.fspath(compiled.cache_folder().parent),
    }  # fmt: skip
    return warm_compiled, json.dumps(spec, sort_keys=True)


def warm_compiled(argument: str) -> None:
    """Load (or compile and cache) PPO's graphs for ``argument``, a :func:`compiled_warm_up` spec,
    and the env's compiled step where it has one.

    Runs in the fork server: builds the env and a ``PPO(compile=True)`` with the spec's
    settings, warms it up and takes one env step, so the graphs stay loaded for the workers
    it forks.
    """
    try:
        spec = json.loads(argument)
        os.environ[compiled.CACHE_VARIABLE] = spec["cache"]
        torch.set_num_threads(spec["threads"])
        if spec.get("description"):
            use_description(spec["description"])
        threads = _threads()
        env: Any = training_env(spec["env_id"], spec["num_envs"], spec["device"], 0, compile=True)
        model: Any = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # torch.export's, not the user's
                # the env as the workers train in it (the program's reward comes per rollout,
                # reward_fn, so PPO compiles its rollout with the env's step)
                model = PPO(env, device=spec["device"], **spec["ppo_kwargs"])
                model.warm_up()
                if getattr(env, "compile", False):  # the env's step compiles (or loads) at its first step
                    obs, _ = env.reset(seed=0)
                    env.step(torch.as_tensor(model.predict(obs, deterministic=True)[0], device=env.device))
        finally:
            env.close()
            # MuJoCo's batch keeps a C thread pool until it is freed; a first compile leaves
            # tqdm's monitor thread behind, and may leave Inductor's compile workers' threads
            env = model = None
            gc.collect()
            _stop_tqdm_monitor()
            _stop_compile_workers()
            # the workers' environment stays the server's minimal one (they find the graphs in memory)
            os.environ.pop(compiled.CACHE_VARIABLE, None)
        left = _threads_left(threads)
        if left:  # a fork would copy a lock some thread holds: workers could hang
            names = ", ".join(sorted(set(left.values())))
            raise RuntimeError(f"the warm-up left {len(left)} thread(s) running in the fork server, which "
                               f"forks its workers ({names})")
    except Exception as error:
        _WARMED[argument] = f"{type(error).__name__}: {error}"[:500]
        raise
    _WARMED[argument] = ""


def _stop_tqdm_monitor() -> None:
    tqdm = sys.modules.get("tqdm")
    monitor = getattr(getattr(tqdm, "tqdm", None), "monitor", None)
    if monitor is not None:
        monitor.exit()
        tqdm.tqdm.monitor = None


def _stop_compile_workers() -> None:
    """Shut Inductor's pool of compile workers (and the threads that wait on it), if it started."""
    async_compile = sys.modules.get("torch._inductor.async_compile")
    shutdown = getattr(async_compile, "shutdown_compile_workers", None)
    if shutdown is not None:
        shutdown()


def _threads_left(before: Mapping[str, str], wait_s: float = 2.0) -> dict[str, str]:
    """The threads not in ``before``, once those that are ending have ended (a pool shut down
    a moment ago may still be joining its threads), waiting at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        left = {tid: name for tid, name in _threads().items() if tid not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def _threads() -> dict[str, str]:
    """This process's threads (Python's and C libraries' alike) by id, with their names; empty
    where /proc is missing."""
    threads = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as comm:
                threads[tid] = comm.read().strip()
    except OSError:
        pass  # a thread that ended while being listed, or no /proc
    return threads


def training_env(env_id: str, num_envs: int, device: str, seed: int, compile: bool = False) -> envs.BatchedEnv:
    """The batched env a program trains in; with ``compile``, its step compiled where the env
    compiles (rewardlab's torch envs; MuJoCo's physics and Gymnasium's envs do not)."""
    if compile:
        try:
            return envs.make(env_id, num_envs=num_envs, device=device, seed=seed, compile=True)
        except ValueError:  # this env's step does not compile
            pass
    return envs.make(env_id, num_envs=num_envs, device=device, seed=seed)


def _compile_in_worker(payload: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The PPO settings a worker trains with, and a note when ``compile`` had to be dropped.

    Confines the compile cache to what the fork server loaded; when it loaded nothing for
    this payload (its warm-up failed, say for want of a C++ compiler), the worker trains
    eagerly, which gives the same training up to float rounding.
    """
    ppo_kwargs = dict(payload["ppo_kwargs"])
    if not ppo_kwargs.get("compile"):
        return ppo_kwargs, ""
    compiled.loaded_only()
    problem = _WARMED.get(payload.get("compile_warm") or "", "the fork server did not load them")
    if not problem:
        return ppo_kwargs, ""
    ppo_kwargs["compile"] = False
    return ppo_kwargs, f"trained eagerly: PPO's compiled graphs were not available ({problem})"


@dataclass
class Checkpoint:
    """The state of one training run at one point.

    :param step: env steps trained so far.
    :param fitness: mean true return of the evaluation episodes.
    :param success_rate: share of successful evaluation episodes (``None`` when the task
        has no success rule).
    :param train_return: mean true return of the training episodes that finished since the
        previous checkpoint (``None`` if none did).
    :param components: mean per step of each reward component since the previous checkpoint.
    :param reward: mean per step of the reward trained on (the program's own reward) since
        the previous checkpoint; with ``fitness`` it shows whether the two move together.
    """

    step: int
    fitness: float
    success_rate: float | None
    train_return: float | None
    components: dict[str, float] = field(default_factory=dict)
    reward: float | None = None


def evaluate_policy(
    model: PPO,
    description: EnvDescription,
    episodes: int,
    device: str | torch.device,
    seed: int,
) -> tuple[float, float | None]:
    """Mean true return (and success rate) of ``episodes`` deterministic episodes.

    Runs one episode in each of ``episodes`` copies of the env, from the same start states
    for the same ``seed``.

    :param model: the trained policy.
    :param description: the env's description (its id and success rule).
    :param episodes: how many episodes (envs in the batch).
    :param device: the model's device.
    :param seed: seed of the evaluation env.
    :return: ``(mean_return, success_rate or None)``.
    """
    env = envs.make(description.env_id, num_envs=episodes, device=device, seed=seed)
    try:
        measured = play_episodes(model, env, seed=seed, success=description.success)
    finally:
        env.close()
    return measured.mean_return, measured.success_rate


def train_program(
    reward_function: RewardFunction | RemoteReward,
    *,
    seed: int,
    steps: int,
    num_envs: int,
    device: str = "cpu",
    ppo_kwargs: Mapping[str, Any] | None = None,
    num_checkpoints: int = 10,
    eval_episodes: int = 10,
    tensorboard_log: str | None = None,
    checkpoints: list[Checkpoint] | None = None,
    measure: Callable[[PPO], tuple[float, float | None]] | None = None,
    on_checkpoint: Callable[[Checkpoint], None] | None = None,
) -> list[Checkpoint]:
    """Train ``rewardlab.agents.PPO`` on the program's reward for one seed, measuring fitness along the way.

    A :class:`RewardFunction` runs the program in this process (trusted programs only); the
    sandbox's job passes a :class:`RemoteReward`, which asks the program's own process.

    :param reward_function: the loaded program, or the companion that runs it (in the sandbox).
    :param seed: seeds the env and PPO; the evaluation env gets ``seed + 10_000``.
    :param steps: env steps to train for (whole PPO rollouts, so a little more).
    :param num_envs: batched envs to train in.
    :param device: torch device of env and networks.
    :param ppo_kwargs: hyperparameters for ``rewardlab.agents.PPO`` (its defaults otherwise);
        with ``compile``, the env's step is compiled too (:func:`training_env`).
    :param num_checkpoints: measure at about this many evenly spaced points, the last at the end.
    :param eval_episodes: evaluation episodes per checkpoint.
    :param tensorboard_log: PPO's TensorBoard folder, or ``None``.
    :param checkpoints: a list to append checkpoints to as they are taken (so a caller keeps
        them when training fails half-way); a new list when ``None``.
    :param measure: ``measure(model) -> (fitness, success_rate)`` at each checkpoint;
        default: play ``eval_episodes`` episodes here (:func:`evaluate_policy`).
    :param on_checkpoint: called with each checkpoint once it is taken.
    :return: the checkpoints.
    :raises ProgramError: the program failed.
    """
    checkpoints = [] if checkpoints is None else checkpoints
    description = reward_function.description
    compile = bool(dict(ppo_kwargs or {}).get("compile"))
    env = training_env(description.env_id, num_envs, device, seed, compile)
    model = PPO(env, seed=seed, device=device, tensorboard_log=tensorboard_log,
                reward_fn=rollout_reward(reward_function), **dict(ppo_kwargs or {}))
    component_values: dict[str, list[float]] = {}
    rewards: list[float] = []
    train_returns: list[float] = []
    next_index = 1

    def callback(local: Mapping[str, Any]) -> None:
        nonlocal next_index
        logged: Mapping[str, float] = local["logged"]
        for key, value in logged.items():
            if key.startswith(_REWARD_PREFIX):
                component_values.setdefault(key[len(_REWARD_PREFIX):], []).append(value)
        rewards.append(float(local["rollout"].rewards.double().mean()))
        if "episode/extrinsic" in logged:
            train_returns.append(logged["episode/extrinsic"])
        if model.num_timesteps < steps * next_index / num_checkpoints:
            return
        while next_index <= num_checkpoints and model.num_timesteps >= steps * next_index / num_checkpoints:
            next_index += 1
        if measure is None:
            fitness, success_rate = evaluate_policy(model, description, eval_episodes, device, seed + 10_000)
        else:
            fitness, success_rate = measure(model)
        checkpoints.append(
            Checkpoint(
                step=model.num_timesteps,
                fitness=fitness,
                success_rate=success_rate,
                train_return=sum(train_returns) / len(train_returns) if train_returns else None,
                components={name: sum(values) / len(values) for name, values in component_values.items()},
                reward=sum(rewards) / len(rewards),
            )
        )
        if on_checkpoint is not None:
            on_checkpoint(checkpoints[-1])
        component_values.clear()
        rewards.clear()
        train_returns.clear()

    try:
        model.learn(steps, callback=callback)
    finally:
        env.close()
    return checkpoints


def reward_companion(payload: Mapping[str, Any], channel: socket.socket, guard: Guard) -> None:
    """The companion of :func:`evaluation_job` and the prescreen's scoring: the one process
    that loads ``payload["program"]``, answering the job's reward requests
    (:func:`~rewardlab.llm_reward.sandbox.reward_process.serve_rewards`).

    :param payload: the job's payload (``program``, ``env_id``, ``description``).
    :param channel: its end of the socket pair with the job.
    :param guard: its installed guard, its modules snapshot taken.
    """
    description = describe_for(payload)
    program = RewardProgram(**payload["program"])
    serve_rewards(lambda: RewardFunction(program, description, check=lambda: guard.violation), channel, guard)


def rollout_reward(reward_function: RewardFunction | RemoteReward) -> Callable[..., Any]:
    """The program's reward as PPO's ``reward_fn``: the program called once per rollout, on
    all its transitions (the companion answers one request a rollout, and batched code runs
    once on every row), its components named ``program/<name>`` as
    :class:`~rewardlab.llm_reward.programs.wrapper.ProgramReward` names them."""

    def reward_fn(
        obs: torch.Tensor, actions: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor,
        env_reward: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        reward, components = reward_function(obs, actions, next_obs, terminated, env_reward)
        return reward, {COMPONENT_PREFIX + name: value for name, value in components.items()}

    return reward_fn


def evaluation_job(
    payload: Mapping[str, Any],
    guard: Guard,
    companion: tuple[socket.socket, int],
    progress: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """The sandboxed job behind :func:`rewardlab.llm_reward.evaluate`: train every seed on the
    program's reward, report.

    The program runs in the job's companion (:func:`reward_companion`), never here: this
    process trains, ships the policies the caller measures and writes the result, and
    takes nothing from the program but its reward values
    (:class:`~rewardlab.llm_reward.sandbox.reward_process.RemoteReward`).

    :param payload: ``program`` (``source``, ``function_name``, ``parameters``), ``env_id``,
        ``seeds``, ``steps``, ``num_envs``, ``device``, ``ppo_kwargs``, ``num_checkpoints``,
        ``eval_episodes`` and ``tensorboard_log``; with ``ppo_kwargs["compile"]``,
        ``compile_warm``: the fork server's :func:`compiled_warm_up` argument, whose graphs
        the worker uses (it trains eagerly when the server could not load them).
    :param guard: the installed guard of this worker.
    :param companion: the channel to the companion and its pid.
    :param progress: sends each checkpoint to the caller as it is taken, with its policy
        (``{"seed", "checkpoint", "policy"}``), so that a timeout or a crash later on keeps
        it (see :func:`partial_result`).
    :return: ``{"seeds": [{"seed", "checkpoints", "policies", "wall_s"}], "failure": None |
        {...}, "compile_note", "peak_rss_mb", "peak_vm_mb", "cpu_s"}``; ``policies`` holds one
        :func:`policy_snapshot` per checkpoint, whose fitness the caller measures;
        ``compile_note`` says why a ``compile`` run trained eagerly ("" otherwise).
    """
    description = describe_for(payload)
    program = RewardProgram(**payload["program"])
    ppo_kwargs, compile_note = _compile_in_worker(payload)
    runs: list[dict[str, Any]] = []
    failure = None
    reward_function: RemoteReward | None = None
    try:
        reward_function = RemoteReward(*companion, program, description)
        for seed in payload["seeds"]:
            start = time.perf_counter()
            checkpoints: list[Checkpoint] = []
            policies: list[dict[str, Any]] = []
            runs.append({"seed": seed, "checkpoints": checkpoints, "policies": policies, "wall_s": None})

            def ship(model: PPO, policies: list[dict[str, Any]] = policies) -> tuple[float, None]:
                policies.append(policy_snapshot(model))
                return 0.0, None  # the caller measures the fitness, from the policy

            def send(checkpoint: Checkpoint, seed: int = seed, policies: list[dict[str, Any]] = policies) -> None:
                if progress is not None:
                    progress({"seed": seed, "checkpoint": asdict(checkpoint), "policy": policies[-1]})

            train_program(
                reward_function,
                seed=seed,
                steps=payload["steps"],
                num_envs=payload["num_envs"],
                device=payload["device"],
                ppo_kwargs=ppo_kwargs,
                num_checkpoints=payload["num_checkpoints"],
                eval_episodes=payload["eval_episodes"],
                tensorboard_log=payload["tensorboard_log"],
                checkpoints=checkpoints,
                measure=ship,
                on_checkpoint=send,
            )
            runs[-1]["wall_s"] = time.perf_counter() - start
    except ProgramError as error:
        failure = {"kind": error.kind, "reason": error.reason, "traceback": error.traceback}
    except Exception as error:
        failure = _failure_from_exception(error)
    finally:
        if reward_function is not None:
            reward_function.close()  # never raises: a companion that stays on is left to the teardown
    if guard.violation is not None:
        failure = {"kind": "sandbox", "reason": guard.violation,
                   "traceback": failure["traceback"] if failure else ""}
    for run in runs:
        run["checkpoints"] = [asdict(checkpoint) for checkpoint in run["checkpoints"]]
    # this process's usage and its reaped companion's (the program's CPU time and memory)
    usage, program = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    per_state = reward_function is not None and reward_function.per_state
    return {
        "compile_note": compile_note,
        "per_state": bool(per_state),
        "per_state_reason": reward_function.per_state_reason if per_state else "",
        "per_state_mode": reward_function.per_state_mode if per_state else "",
        "seeds": runs,
        "failure": failure,
        "peak_rss_mb": max(usage.ru_maxrss, program.ru_maxrss) / 1024,
        "peak_vm_mb": _peak_address_space_mb(),
        "cpu_s": usage.ru_utime + usage.ru_stime + program.ru_utime + program.ru_stime,
    }


def partial_result(progress: Sequence[Any]) -> dict[str, Any] | None:
    """What :func:`evaluation_job` would have returned for the checkpoints it sent as
    progress before it stopped (a timeout, a crash): each seed's checkpoints and policies,
    no seed finished (``wall_s`` None). ``None`` when it sent none. The data is untrusted
    and checked by whoever reads the result, as the job's own result is.

    :param progress: the job's progress messages, in order (:attr:`SandboxRun.progress
        <rewardlab.llm_reward.sandbox.runner.SandboxRun.progress>`).
    """
    runs: list[dict[str, Any]] = []
    for message in progress:
        if not isinstance(message, dict) or not {"seed", "checkpoint", "policy"} <= set(message):
            break  # nothing after a malformed message is trusted to be in order
        if not runs or runs[-1]["seed"] != message["seed"]:
            runs.append({"seed": message["seed"], "checkpoints": [], "policies": [], "wall_s": None})
        runs[-1]["checkpoints"].append(message["checkpoint"])
        runs[-1]["policies"].append(message["policy"])
    if not runs:
        return None
    return {"seeds": runs, "failure": None}


def _peak_address_space_mb() -> float | None:
    """This process's peak address space (``VmPeak``, what ``RLIMIT_AS`` limits), Linux only."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _failure_from_exception(error: Exception) -> dict[str, Any]:
    """A failure record for an exception that escaped training without being a ProgramError.

    Running out of memory under the address-space limit (after the program filled it) is
    the common case; the traceback keeps only the program's frames, if any.
    """
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, MemoryError) or "can't allocate memory" in str(error):
        return {"kind": "limit", "reason": f"training ran out of memory: {text}"[:2000],
                "traceback": program_traceback(error)}
    return {"kind": "error", "reason": f"training failed: {text}"[:2000],
            "traceback": program_traceback(error)}


# ------------------------------------------------------- policies as plain data
MAX_SNAPSHOT_VALUES = 20_000_000
_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def policy_snapshot(model: PPO) -> dict[str, Any]:
    """The policy's weights and observation statistics as JSON data: for each tensor its
    dtype, shape and little-endian bytes in base64.

    :param model: the model whose acting parts to ship (actor, critic, ``obs_rms``).
    """
    tensors = {**{f"policy.{k}": v for k, v in model.policy.state_dict().items()},
               **{f"obs_rms.{k}": v for k, v in model.obs_rms.state_dict().items()}}
    return {
        name: {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
               "data": base64.b64encode(tensor.detach().cpu().contiguous().numpy().tobytes()).decode()}
        for name, tensor in tensors.items()
    }


def measure_snapshot(
    snapshot: Any,
    description: EnvDescription,
    ppo_kwargs: Mapping[str, Any],
    episodes: int,
    device: str | torch.device,
    seed: int,
) -> tuple[float, float | None]:
    """Mean true return (and success rate) of a shipped policy, as :func:`evaluate_policy`.

    Runs in the caller, which never loaded the program: the snapshot is untrusted data,
    read only as arrays of the exact names, dtypes and shapes a fresh model has.

    :param snapshot: what :func:`policy_snapshot` returned in the worker.
    :param description: the env's description (its id and success rule).
    :param ppo_kwargs: the hyperparameters the worker trained with (they fix the shapes).
    :param episodes: evaluation episodes (envs in the batch).
    :param device: where to evaluate.
    :param seed: seed of the evaluation env.
    :raises ValueError: the snapshot is not the policy of such a model.
    """
    env = envs.make(description.env_id, num_envs=episodes, device=device, seed=seed)
    try:
        model = load_snapshot(snapshot, env, ppo_kwargs, seed)
        measured = play_episodes(model, env, seed=seed, success=description.success)
    finally:
        env.close()
    return measured.mean_return, measured.success_rate


def load_snapshot(snapshot: Any, env: Any, ppo_kwargs: Mapping[str, Any], seed: int = 0) -> PPO:
    """A fresh ``PPO`` on ``env`` with a shipped policy's weights and observation statistics.

    The snapshot is untrusted data: only arrays of the exact names, dtypes and shapes the
    fresh model has are read, and they must be finite.

    :param snapshot: what :func:`policy_snapshot` returned in the worker.
    :param env: the batched env the model acts in.
    :param ppo_kwargs: the hyperparameters the worker trained with (they fix the shapes).
    :param seed: seeds the fresh model (its action sampling).
    :raises ValueError: the snapshot is not the policy of such a model.
    """
    # the minibatch size plays no part in acting, and may not fit this env's batch; acting
    # is not what compile=True compiles
    model = PPO(env, seed=seed, device=env.device, **{**dict(ppo_kwargs), "batch_size": None, "compile": False})
    expected = {**{f"policy.{k}": v for k, v in model.policy.state_dict().items()},
                **{f"obs_rms.{k}": v for k, v in model.obs_rms.state_dict().items()}}
    if not isinstance(snapshot, dict) or set(snapshot) != set(expected):
        raise ValueError("the policy snapshot does not name the model's tensors")
    loaded = {name: _decode(snapshot[name], like) for name, like in expected.items()}
    model.policy.load_state_dict({k[len("policy."):]: v for k, v in loaded.items() if k.startswith("policy.")})
    model.obs_rms.load_state_dict({k[len("obs_rms."):]: v for k, v in loaded.items() if k.startswith("obs_rms.")})
    return model


def _decode(data: Any, like: torch.Tensor) -> torch.Tensor:
    if not isinstance(data, dict) or set(data) != {"dtype", "shape", "data"}:
        raise ValueError("a tensor of the snapshot is not {dtype, shape, data}")
    dtype = _DTYPES.get(data["dtype"])
    if dtype is None or dtype != like.dtype or data["shape"] != list(like.shape):
        raise ValueError(f"a tensor of the snapshot has dtype {data['dtype']!r} and shape {data['shape']!r}, "
                         f"not {like.dtype} {list(like.shape)}")
    if like.numel() > MAX_SNAPSHOT_VALUES or not isinstance(data["data"], str):
        raise ValueError("a tensor of the snapshot is too large or not base64 text")
    raw = base64.b64decode(data["data"], validate=True)
    if len(raw) != like.numel() * like.element_size():
        raise ValueError("a tensor of the snapshot has the wrong number of bytes")
    tensor = torch.frombuffer(bytearray(raw), dtype=dtype).reshape(like.shape).clone()
    if not bool(torch.isfinite(tensor).all()):
        raise ValueError("a tensor of the snapshot holds NaN or infinite values")
    return tensor.to(like.device)
