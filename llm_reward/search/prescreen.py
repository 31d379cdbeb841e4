"""``--prescreen``: score a program on stored trajectories of known fitness before training it.

After CARD's trajectory preference evaluation: a good reward should give better
trajectories (higher true task return) a higher return of its own. Once per env and run,
:func:`collect_trajectories` rolls out a random policy and a policy trained briefly on
the env's human reference reward (deterministic at three points of its training, and
half random at the end), and stores each trajectory with its true return
(``OUT/prescreen/trajectories.json``). :func:`prescreen` then runs a candidate on every
stored transition, in the sandbox like any candidate code, sums its reward per
trajectory and compares the two rankings with Kendall's tau-b: below the threshold the
program is sent back with the finding instead of being trained. With fewer than
:data:`MIN_PAIRS` trajectory pairs of different true return the test is inconclusive and
the program passes.
"""

from __future__ import annotations

import json
import math
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from rewardlab.envs.description_files import description_data
from rewardlab.llm_reward.programs.program import (
    ProgramError,
    RewardFunction,
    RewardProgram,
)
from rewardlab.llm_reward.programs.text import sanitize
from rewardlab.llm_reward.sandbox.guard import Guard
from rewardlab.llm_reward.sandbox.runner import Limits, run_sandboxed
from rewardlab.llm_reward.search.records import PrescreenScore
from rewardlab.llm_reward.training import Failure
from rewardlab.llm_reward.training.compiled import preload_for
from rewardlab.llm_reward.training.job import reward_companion
from rewardlab.llm_reward.training.reward_process import RemoteReward

__all__ = ["collect_trajectories", "kendall_tau_b", "prescreen", "score_job", "stored_trajectories"]

MIN_PAIRS = 10
DIGITS = 6


def kendall_tau_b(scores: Sequence[float], truth: Sequence[float]) -> tuple[float | None, int]:
    """Kendall's tau-b of ``scores`` against ``truth`` and the number of pairs ``truth`` orders.

    Values within a relative 1e-9 count as tied. Tau is ``None`` when no pair is ordered
    by both, 0 when ``scores`` ties every pair ``truth`` orders.

    :param scores: e.g. a program's return per trajectory.
    :param truth: the true task return per trajectory.
    """
    def sign(a: float, b: float) -> int:
        if abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)):
            return 0
        return 1 if a > b else -1

    concordant = discordant = tied_scores = tied_truth = 0
    for i in range(len(scores)):
        for j in range(i + 1, len(scores)):
            ds, dt = sign(scores[i], scores[j]), sign(truth[i], truth[j])
            if ds == 0 and dt == 0:
                continue
            if ds == 0:
                tied_scores += 1
            elif dt == 0:
                tied_truth += 1
            elif ds == dt:
                concordant += 1
            else:
                discordant += 1
    ordered = concordant + discordant + tied_scores
    if ordered == 0:
        return None, 0
    denominator = math.sqrt(ordered * (concordant + discordant + tied_truth))
    return ((concordant - discordant) / denominator if denominator else 0.0), ordered


# ----------------------------------------------------------------- collection (trusted)
def _rollouts(
    env_id: str, act: Callable[[torch.Tensor, Any], torch.Tensor], episodes: int, seed: int, label: str
) -> list[dict[str, Any]]:
    """One episode in each of ``episodes`` envs: states (with the true last one), actions, return."""
    from rewardlab import envs

    env = envs.make(env_id, num_envs=episodes, seed=seed)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    states: list[torch.Tensor] = [obs.clone()]
    actions: list[torch.Tensor] = []
    rewards: list[torch.Tensor] = []
    returns = torch.zeros(episodes)
    done = torch.zeros(episodes, dtype=torch.bool)
    terminated_at_end = torch.zeros(episodes, dtype=torch.bool)
    length = torch.zeros(episodes, dtype=torch.long)
    for _ in range(env.max_episode_steps):
        action = act(obs, env)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action.clone())
        rewards.append(reward.clone())
        states.append(info["final_obs"].clone())
        returns += reward * ~done
        length += ~done
        ended = (terminated | truncated) & ~done
        terminated_at_end |= ended & terminated
        done |= ended
        if bool(done.all()):
            break
    env.close()
    trajectories = []
    for index in range(episodes):
        steps = int(length[index])
        trajectories.append({
            "policy": label,
            "return": float(returns[index]),
            "states": [[round(float(v), DIGITS) for v in state[index].reshape(-1)] for state in states[: steps + 1]],
            "actions": [action[index].tolist() for action in actions[:steps]],
            "rewards": [round(float(reward[index]), DIGITS) for reward in rewards[:steps]],
            "terminated": bool(terminated_at_end[index]),
        })
    return trajectories


def _random_action(env: Any) -> torch.Tensor:
    action = torch.as_tensor(env.action_space.sample())
    return action.float() if action.dtype.is_floating_point else action


def collect_trajectories(
    env_id: str,
    train_steps: int,
    seed: int = 0,
    episodes: int = 4,
    num_envs: int = 8,
    ppo_kwargs: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Trajectories of known true return: random, and from PPO trained on the human reference.

    Runs in this process (the code is the env's trusted reference program and rewardlab's
    PPO), on one torch thread as the sandboxed evaluations do (several threads on a busy
    machine made it fifty times slower): ``episodes`` random ones, ``episodes``
    deterministic ones after each third of ``train_steps`` of training, and ``episodes`` at
    the end with half the actions random.

    :param env_id: a batched env with reference programs.
    :param train_steps: PPO's training budget on the human reference reward.
    :param seed: seeds training and rollouts.
    :param episodes: trajectories per policy.
    :param num_envs: envs PPO trains in.
    :param ppo_kwargs: PPO's hyperparameters (its defaults otherwise).
    :return: JSON data: ``policy``, ``return``, ``states`` (``T + 1``), ``actions``,
        ``terminated``.
    """
    from rewardlab import envs
    from rewardlab.agents.ppo import PPO
    from rewardlab.envs.descriptions import describe
    from rewardlab.llm_reward.programs.references import SHAPING, reference_programs
    from rewardlab.llm_reward.programs.wrapper import ProgramReward
    from rewardlab.llm_reward.search.budgets import learner_discount

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        description = describe(env_id)
        gamma = learner_discount(ppo_kwargs or {}, SHAPING)  # the learner's: its shaping telescopes
        human = RewardFunction(reference_programs(env_id, gamma)["human"], description)
        env = ProgramReward(envs.make(env_id, num_envs=num_envs, seed=seed), human)
        model = PPO(env, seed=seed, **dict(ppo_kwargs or {}))
        trajectories = _rollouts(env_id, lambda obs, env: _random_action(env), episodes, seed + 1, "random")
        trajectories += _trained_rollouts(model, env_id, train_steps, seed, episodes)
        env.close()
        return trajectories
    finally:
        torch.set_num_threads(threads)


def _trained_rollouts(model: Any, env_id: str, train_steps: int, seed: int, episodes: int) -> list[dict[str, Any]]:
    """Rollouts of ``model`` after each third of its training, and half random at the end."""
    generator = torch.Generator().manual_seed(seed)

    def policy(epsilon: float) -> Callable[[torch.Tensor, Any], torch.Tensor]:
        def act(obs: torch.Tensor, rollout_env: Any) -> torch.Tensor:
            action, _ = model.predict(obs, deterministic=True)
            if epsilon > 0:
                random_action = _random_action(rollout_env).to(action.dtype).reshape(action.shape)
                mask = torch.rand(len(obs), generator=generator) < epsilon
                action = torch.where(mask.reshape(-1, *[1] * (action.dim() - 1)), random_action, action)
            return action
        return act

    trajectories = []
    for third in range(1, 4):
        model.learn(max(train_steps // 3, 1), reset_num_timesteps=third == 1)
        trajectories += _rollouts(env_id, policy(0.0), episodes, seed + 1 + third, f"human-ppo {third}/3")
    trajectories += _rollouts(env_id, policy(0.5), episodes, seed + 5, "human-ppo 3/3, half random")
    return trajectories


def stored_trajectories(text: str) -> list[dict[str, Any]] | None:
    """The trajectories a run folder's ``prescreen/trajectories.json`` holds, read as data of
    unknown type (the folder may have been shared or edited): ``None`` unless it is
    :func:`collect_trajectories`' output in shape (each a true return that is a finite number,
    lists of states, one more than its actions, and of rewards, and ``terminated`` a boolean).

    :param text: the file's text.
    """
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's limit
        return None
    trajectories = data.get("trajectories") if isinstance(data, dict) else None
    if not isinstance(trajectories, list) or not trajectories:
        return None
    for trajectory in trajectories:
        if not (isinstance(trajectory, dict) and _finite_numbers([trajectory.get("return")], 1)
                and isinstance(trajectory.get("states"), list) and isinstance(trajectory.get("actions"), list)
                and len(trajectory["states"]) == len(trajectory["actions"]) + 1
                and isinstance(trajectory.get("rewards", []), list)
                and isinstance(trajectory.get("terminated"), bool)):
            return None
    return trajectories


# ------------------------------------------------------------- scoring (in the sandbox)
def score_job(payload: Mapping[str, Any], guard: Guard, companion: tuple[socket.socket, int]) -> dict[str, Any]:
    """The sandboxed job: the program's undiscounted return on each stored trajectory.

    The program runs in the job's companion
    (:func:`~rewardlab.llm_reward.training.job.reward_companion`), which answers the
    rewards; this process sums them and writes the result.

    :param payload: ``program`` (``source``, ``function_name``, ``parameters``), ``env_id``
        and ``trajectories`` (``states``, ``actions``, ``rewards``, ``terminated``).
    :param guard: the worker's installed guard.
    :param companion: the channel to the companion and its pid.
    :return: ``{"returns": [...], "failure": None | {"kind", "reason", "traceback"}}``.
    """
    from rewardlab.llm_reward.training.job import describe_for

    description = describe_for(payload)
    program = RewardProgram(**payload["program"])
    action_dtype = torch.float32 if description.action.dtype.startswith("float") else torch.int64
    returns: list[float] = []
    failure = None
    function = None
    try:
        function = RemoteReward(*companion, program, description)
        for trajectory in payload["trajectories"]:
            states = torch.tensor(trajectory["states"], dtype=torch.float32)
            actions = torch.tensor(trajectory["actions"], dtype=action_dtype)
            terminated = torch.zeros(len(actions), dtype=torch.bool)
            terminated[-1] = bool(trajectory["terminated"])
            # the env's own rewards (trajectories stored before they were kept have none)
            env_reward = torch.tensor(trajectory["rewards"]) if "rewards" in trajectory else None
            reward, _ = function(states[:-1], actions, states[1:], terminated, env_reward)
            returns.append(float(reward.double().sum()))
    except ProgramError as error:
        failure = {"kind": error.kind, "reason": error.reason, "traceback": error.traceback}
    except Exception as error:
        failure = {"kind": "error", "reason": f"scoring failed: {type(error).__name__}: {error}"[:2000],
                   "traceback": ""}
    finally:
        late = function.close() if function is not None else None
    if late is not None and (failure is None or failure["kind"] != "sandbox"):
        failure = {"kind": late.kind, "reason": late.reason, "traceback": ""}
    if guard.violation is not None:
        failure = {"kind": "sandbox", "reason": guard.violation, "traceback": ""}
    return {"returns": returns, "failure": failure}


_LARGEST = sys.float_info.max


#: the sandboxed job that scores a program (a module constant, so that a test can swap it)
SCORE_JOB = score_job


def _finite_numbers(value: Any, length: int) -> list[float]:
    """``value`` as ``length`` finite floats (it comes from the sandbox), or ``[]``."""
    if not isinstance(value, list) or len(value) != length:
        return []
    # compared, not converted: an integer past any float (JSON's have no bound) raised OverflowError
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and -_LARGEST <= v <= _LARGEST for v in value):
        return []
    return [float(v) for v in value]


def _worst_pair(returns: Sequence[float], truth: Sequence[float]) -> tuple[int, int] | None:
    """The misordered pair (better, worse) whose true returns differ most."""
    worst, gap = None, 0.0
    for i in range(len(truth)):
        for j in range(len(truth)):
            if truth[i] > truth[j] and returns[i] < returns[j] and truth[i] - truth[j] > gap:
                worst, gap = (i, j), truth[i] - truth[j]
    return worst


def prescreen(
    program: RewardProgram,
    env_id: str,
    trajectories: Sequence[Mapping[str, Any]],
    run_dir: str | Path,
    threshold: float,
    timeout_s: float = 120.0,
) -> PrescreenScore:
    """Score ``program`` on the stored trajectories in the sandbox; pass or reject it.

    :param program: a program that passed the static checks for ``env_id``.
    :param env_id: the env.
    :param trajectories: :func:`collect_trajectories`' output.
    :param run_dir: the sandbox's folder (created).
    :param threshold: the lowest Kendall tau that passes.
    :param timeout_s: wall-clock limit of the scoring.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "program": asdict(program),
        "env_id": env_id,
        "description": description_data(env_id),
        "trajectories": [{key: t[key] for key in ("states", "actions", "rewards", "terminated") if key in t}
                         for t in trajectories],
    }
    run = run_sandboxed(SCORE_JOB, payload, run_dir, Limits(timeout_s=timeout_s), preload_for(env_id),
                        companion=reward_companion)
    truth = [float(t["return"]) for t in trajectories]
    failure = None
    returns: list[float] = []
    # what the worker wrote is untrusted text: it reaches the terminal, the report and the next prompt
    if run.violation is not None:
        failure = Failure("sandbox", sanitize(run.violation[:2000]))
    elif run.result is None:
        failure = Failure(run.error_kind or "crash", sanitize((run.error or "the prescreen returned nothing")[:8000]),
                          details=sanitize(run.log_tail))
    elif not isinstance(run.result, dict):
        failure = Failure("crash", "the prescreen sent back malformed data")
    else:
        raw = run.result.get("failure")
        if isinstance(raw, dict):
            failure = Failure(sanitize(str(raw.get("kind", "error"))[:40]), sanitize(str(raw.get("reason", ""))[:2000]),
                              traceback=sanitize(str(raw.get("traceback", ""))[:8000]))
        else:
            returns = _finite_numbers(run.result.get("returns"), len(truth))
            if not returns:
                failure = Failure("crash", "the prescreen sent back malformed returns")
    if failure is not None:
        return PrescreenScore(None, 0, False, [], f"it failed on the stored trajectories ({failure.kind}): "
                              f"{failure.reason}", failure)
    tau, pairs = kendall_tau_b(returns, truth)
    if pairs < MIN_PAIRS or tau is None:
        return PrescreenScore(tau, pairs, True, returns, f"inconclusive: only {pairs} pairs of the "
                              f"{len(truth)} stored trajectories differ in task return")
    passed = tau >= threshold
    finding = (f"on {len(truth)} stored trajectories of known task return its return ranks them with "
               f"Kendall tau {tau:+.2f} (threshold {threshold:+.2f})")
    pair = _worst_pair(returns, truth)
    if not passed and pair is not None:
        better, worse = pair
        finding += (f": it prefers worse trajectories, e.g. it gives one of task return {truth[worse]:.4g} "
                    f"a return of {returns[worse]:.4g} but one of task return {truth[better]:.4g} only "
                    f"{returns[better]:.4g}")
    return PrescreenScore(tau, pairs, passed, returns, finding)
