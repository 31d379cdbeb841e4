"""The sandboxed job that trains PPO on a reward program, and its companion, the one process that loads the program.

:func:`evaluation_job` runs in the sandbox's worker (handed to
:func:`~rewardlab.llm_reward.sandbox.runner.run_sandboxed` by
:func:`~rewardlab.llm_reward.training.run.train_on_program`): it trains every seed on the
rewards its companion (:func:`reward_companion`) answers, and at each checkpoint ships the
policy (:func:`~rewardlab.llm_reward.training.snapshots.policy_snapshot`) beside what it
saw (:class:`~rewardlab.llm_reward.training.records.Progress`: no fitness, which the
caller measures from the policy, so a program cannot change the score it gets).

:func:`train_program` is the training loop of one seed, in whichever process calls it;
:func:`train_and_measure` runs it in this process and measures each checkpoint here
(trusted programs only).
"""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import torch

from rewardlab.agents.ppo import PPO
from rewardlab.envs.description_files import use_description
from rewardlab.envs.descriptions import EnvDescription, describe
from rewardlab.llm_reward.programs.program import (
    COMPONENT_PREFIX,
    ProgramError,
    RewardFunction,
    RewardProgram,
    program_traceback,
)
from rewardlab.llm_reward.sandbox.guard import Guard
from rewardlab.llm_reward.training.compiled import compile_in_worker, training_env
from rewardlab.llm_reward.training.records import Checkpoint, Progress
from rewardlab.llm_reward.training.reward_process import RemoteReward, serve_rewards
from rewardlab.llm_reward.training.snapshots import evaluate_policy, policy_snapshot

__all__ = ["describe_for", "evaluation_job", "partial_result", "reward_companion", "rollout_reward",
           "train_and_measure", "train_program"]

_REWARD_PREFIX = "reward/"


def describe_for(payload: Mapping[str, Any]) -> EnvDescription:
    """The description a worker's payload names: a file's (its data travels in the payload) or the env's."""
    if payload.get("description"):
        return use_description(payload["description"])
    return describe(payload["env_id"])


def train_program(
    reward_function: RewardFunction | RemoteReward,
    *,
    seed: int,
    steps: int,
    num_envs: int,
    device: str = "cpu",
    ppo_kwargs: Mapping[str, Any] | None = None,
    num_checkpoints: int = 10,
    tensorboard_log: str | None = None,
    on_progress: Callable[[PPO, Progress], None] | None = None,
) -> list[Progress]:
    """Train ``rewardlab.agents.PPO`` on the program's reward for one seed, reporting at checkpoints.

    A :class:`RewardFunction` runs the program in this process (trusted programs only); the
    sandbox's job passes a :class:`RemoteReward`, which asks the program's own process.

    :param reward_function: the loaded program, or the companion that runs it (in the sandbox).
    :param seed: seeds the env and PPO.
    :param steps: env steps to train for (whole PPO rollouts, so a little more).
    :param num_envs: batched envs to train in.
    :param device: torch device of env and networks.
    :param ppo_kwargs: hyperparameters for ``rewardlab.agents.PPO`` (its defaults otherwise);
        with ``compile``, the env's step is compiled too (:func:`training_env`).
    :param num_checkpoints: report at about this many evenly spaced points, the last at the end.
    :param tensorboard_log: PPO's TensorBoard folder, or ``None``.
    :param on_progress: called as ``on_progress(model, progress)`` at each checkpoint, with
        the model as it is then (to ship or measure its policy).
    :return: what was reported, in order.
    :raises ProgramError: the program failed.
    """
    reported: list[Progress] = []
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
        reported.append(
            Progress(
                step=model.num_timesteps,
                train_return=sum(train_returns) / len(train_returns) if train_returns else None,
                components={name: sum(values) / len(values) for name, values in component_values.items()},
                reward=sum(rewards) / len(rewards),
            )
        )
        if on_progress is not None:
            on_progress(model, reported[-1])
        component_values.clear()
        rewards.clear()
        train_returns.clear()

    try:
        model.learn(steps, callback=callback)
    finally:
        env.close()
    return reported


def train_and_measure(
    reward_function: RewardFunction,
    *,
    seed: int,
    eval_episodes: int = 10,
    device: str = "cpu",
    **options: Any,
) -> list[Checkpoint]:
    """:func:`train_program` in this process, each checkpoint measured here on the env's own
    reward (``eval_episodes`` deterministic episodes, evaluation env seeded ``seed + 10_000``).
    Runs the program in this process: trusted programs only.

    :param reward_function: the loaded program.
    :param seed: the training seed.
    :param eval_episodes: evaluation episodes per checkpoint.
    :param device: torch device.
    :param options: :func:`train_program`'s other arguments.
    """
    checkpoints: list[Checkpoint] = []

    def measure(model: PPO, progress: Progress) -> None:
        fitness, success_rate = evaluate_policy(model, reward_function.description, eval_episodes, device,
                                                seed + 10_000)
        checkpoints.append(Checkpoint.measured(progress, fitness, success_rate))

    train_program(reward_function, seed=seed, device=device, on_progress=measure, **options)
    return checkpoints


def reward_companion(payload: Mapping[str, Any], channel: socket.socket, guard: Guard) -> None:
    """The companion of :func:`evaluation_job` and the prescreen's scoring: the one process
    that loads ``payload["program"]``, answering the job's reward requests
    (:func:`~rewardlab.llm_reward.training.reward_process.serve_rewards`).

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
    """The sandboxed job behind :func:`~rewardlab.llm_reward.training.run.train_on_program`:
    train every seed on the program's reward, ship each checkpoint's policy.

    The program runs in the job's companion (:func:`reward_companion`), never here: this
    process trains, ships the policies the caller measures and writes the result, and
    takes nothing from the program but its reward values
    (:class:`~rewardlab.llm_reward.training.reward_process.RemoteReward`).

    :param payload: ``program`` (``source``, ``function_name``, ``parameters``), ``env_id``,
        ``description``, ``seeds``, ``steps``, ``num_envs``, ``device``, ``ppo_kwargs``,
        ``num_checkpoints`` and ``tensorboard_log``; with ``ppo_kwargs["compile"]``,
        ``compile_warm``: the fork server's
        :func:`~rewardlab.llm_reward.training.compiled.compiled_warm_up` argument, whose
        graphs the worker uses (it trains eagerly when the server could not load them).
    :param guard: the installed guard of this worker.
    :param companion: the channel to the companion and its pid.
    :param progress: sends each checkpoint to the caller as it is taken, with its policy
        (``{"seed", "progress", "policy"}``), so that a timeout or a crash later on keeps
        it (see :func:`partial_result`).
    :return: ``{"seeds": [{"seed", "progress", "policies", "wall_s"}], "failure": None |
        {...}, "compile_note", "peak_rss_mb", "peak_vm_mb", "cpu_s"}``: each seed's
        :class:`~rewardlab.llm_reward.training.records.Progress` points and one policy
        snapshot per point, whose fitness the caller measures; ``compile_note`` says why a
        ``compile`` run trained eagerly ("" otherwise).
    """
    description = describe_for(payload)
    program = RewardProgram(**payload["program"])
    ppo_kwargs, compile_note = compile_in_worker(payload)
    runs: list[dict[str, Any]] = []
    failure = None
    reward_function: RemoteReward | None = None
    try:
        reward_function = RemoteReward(*companion, program, description)
        for seed in payload["seeds"]:
            start = time.perf_counter()
            run: dict[str, Any] = {"seed": seed, "progress": [], "policies": [], "wall_s": None}
            runs.append(run)

            def ship(model: PPO, point: Progress, seed: int = seed, run: dict[str, Any] = run) -> None:
                run["progress"].append(asdict(point))
                run["policies"].append(policy_snapshot(model))
                if progress is not None:
                    progress({"seed": seed, "progress": run["progress"][-1], "policy": run["policies"][-1]})

            train_program(
                reward_function,
                seed=seed,
                steps=payload["steps"],
                num_envs=payload["num_envs"],
                device=payload["device"],
                ppo_kwargs=ppo_kwargs,
                num_checkpoints=payload["num_checkpoints"],
                tensorboard_log=payload["tensorboard_log"],
                on_progress=ship,
            )
            run["wall_s"] = time.perf_counter() - start
    except ProgramError as error:
        failure = {"kind": error.kind, "reason": error.reason, "traceback": error.traceback}
    except Exception as error:
        failure = _failure_from_exception(error)
    finally:
        # never raises; a refused call the answers did not report (made after the last one)
        # fails the candidate all the same
        late = reward_function.close() if reward_function is not None else None
    if late is not None and (failure is None or failure["kind"] != "sandbox"):
        failure = {"kind": late.kind, "reason": late.reason, "traceback": ""}
    if guard.violation is not None:
        failure = {"kind": "sandbox", "reason": guard.violation,
                   "traceback": failure["traceback"] if failure else ""}
    # this process's usage and its reaped companion's (the program's CPU time and memory)
    usage, program_usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    per_state = reward_function is not None and reward_function.per_state
    return {
        "compile_note": compile_note,
        "per_state": bool(per_state),
        "per_state_reason": reward_function.per_state_reason if per_state else "",
        "per_state_mode": reward_function.per_state_mode if per_state else "",
        "seeds": runs,
        "failure": failure,
        "peak_rss_mb": max(usage.ru_maxrss, program_usage.ru_maxrss) / 1024,
        "peak_vm_mb": _peak_address_space_mb(),
        "cpu_s": usage.ru_utime + usage.ru_stime + program_usage.ru_utime + program_usage.ru_stime,
    }


def partial_result(progress: Sequence[Any]) -> dict[str, Any] | None:
    """What :func:`evaluation_job` would have returned for the checkpoints it sent as
    progress before it stopped (a timeout, a crash): each seed's progress points and policies,
    no seed finished (``wall_s`` None). ``None`` when it sent none. The data is untrusted
    and checked by whoever reads the result, as the job's own result is.

    :param progress: the job's progress messages, in order (:attr:`SandboxRun.progress
        <rewardlab.llm_reward.sandbox.runner.SandboxRun.progress>`).
    """
    runs: list[dict[str, Any]] = []
    for message in progress:
        if not isinstance(message, dict) or not {"seed", "progress", "policy"} <= set(message):
            break  # nothing after a malformed message is trusted to be in order
        if not runs or runs[-1]["seed"] != message["seed"]:
            runs.append({"seed": message["seed"], "progress": [], "policies": [], "wall_s": None})
        runs[-1]["progress"].append(message["progress"])
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
