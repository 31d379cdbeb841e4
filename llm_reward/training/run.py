"""Training on an untrusted reward: check a reward program, train PPO on it in the sandbox,
measure what came back.

:func:`train_on_program` is the one way to do it, used by the search for every candidate
and by ``rewardlab train --reward-program``; :func:`evaluate` is the same with the budget's
parts as keywords (``llm_reward.evaluate``). Nothing the program does makes either raise:
failures come back in :attr:`TrainingRun.failure
<rewardlab.llm_reward.training.records.TrainingRun.failure>`.

Example::

    from rewardlab import llm_reward

    program = llm_reward.RewardProgram.from_source('''
    def compute_reward(next_theta, next_x):
        upright = 1.0 - (next_theta / 0.2095) ** 2
        centred = 1.0 - (next_x / 2.4) ** 2
        return upright + 0.1 * centred, {"upright": upright, "centred": centred}
    ''')
    result = llm_reward.evaluate(program, "CartPole-v1", steps=50_000, seeds=(0, 1))
    print(result.ok, result.fitness, result.failure)
    for point in result.curve:
        print(point.step, point.fitness, point.components)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from rewardlab.envs.description_files import description_data, use_description
from rewardlab.envs.descriptions import EnvDescription, describe
from rewardlab.llm_reward.programs.program import (
    COMPONENT_NAME,
    COMPONENT_PREFIX,
    MAX_COMPONENTS,
    RewardProgram,
)
from rewardlab.llm_reward.programs.text import sanitize
from rewardlab.llm_reward.sandbox.files import remove_tree, write_private
from rewardlab.llm_reward.sandbox.runner import Limits, SandboxRun, run_sandboxed
from rewardlab.llm_reward.training.checking import check_source
from rewardlab.llm_reward.training.compiled import compiled_warm_up, preload_for
from rewardlab.llm_reward.training.failures import Failure
from rewardlab.llm_reward.training.job import evaluation_job, partial_result, reward_companion
from rewardlab.llm_reward.training.records import Budget, Checkpoint, Progress, SeedRun, TrainingRun
from rewardlab.llm_reward.training.snapshots import Measured, measure_snapshot
from rewardlab.llm_reward.training.stopping import STOPPED, Stop, StopRule

__all__ = ["evaluate", "train_on_program"]

#: the job the sandbox runs (a module constant, so that a test can swap it)
EVALUATION_JOB = evaluation_job
#: the process that loads the program, beside the job (see run_sandboxed's ``companion``)
REWARD_COMPANION = reward_companion
RESULT_FILE = "result.json"
PER_STATE_NOTE = (
    "the program is written for one state at a time ({where}), so it ran once per env ({how}); "
    "for speed write it on whole batches: every input is a (N,) tensor, so use "
    "torch.where(cond, a, b) for `if`, torch.maximum/torch.clamp for max/min"
)
PER_STATE_COST = {
    "vmap": "mapped over the batch by torch.vmap, one call per step",
    "loop": "in a Python loop, one call per env and step",
}
PROGRAM_FILE = "reward_program.py"


def evaluate(
    program: RewardProgram | str,
    env_id: str,
    steps: int = 100_000,
    seeds: Sequence[int] = (0,),
    timeout_s: float = 600.0,
    memory_mb: int = 4096,
    run_dir: str | os.PathLike[str] | None = None,
    num_envs: int = 8,
    device: str = "cpu",
    *,
    ppo_kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> TrainingRun:
    """:func:`train_on_program` with the budget's parts as keywords: ``steps`` per seed over
    ``num_envs`` envs with PPO's ``ppo_kwargs``; ``options`` are :func:`train_on_program`'s
    other keywords."""
    if ppo_kwargs is not None and not isinstance(ppo_kwargs, Mapping):
        raise ValueError(f"ppo_kwargs must be a dict of PPO's settings, got {type(ppo_kwargs).__name__}")
    budget = Budget(steps, num_envs, dict(ppo_kwargs or {}))
    return train_on_program(program, env_id, budget, seeds, timeout_s=timeout_s, memory_mb=memory_mb,
                            run_dir=run_dir, device=device, **options)


def train_on_program(
    program: RewardProgram | str,
    env_id: str,
    budget: Budget,
    seeds: Sequence[int] = (0,),
    *,
    timeout_s: float = 600.0,
    memory_mb: int = 4096,
    run_dir: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    num_checkpoints: int = 10,
    eval_episodes: int = 10,
    cpu_s: float | None = None,
    threads: int = 1,
    static_checks: bool = True,
    on_final_policy: Callable[[int, Any], None] | None = None,
    description: dict[str, Any] | None = None,
    env_description: EnvDescription | None = None,
    stop_rule: StopRule | None = None,
    on_checkpoint: Callable[[int, int, Any], None] | None = None,
) -> TrainingRun:
    """Check ``program``, then train ``rewardlab.agents.PPO`` on its reward in the sandbox and measure fitness.

    The static checks run here; everything that executes the program (loading it,
    training, measuring) runs in one sandboxed worker process (:mod:`rewardlab.llm_reward.sandbox.runner`)
    for all seeds in turn, under one wall-clock ``timeout_s``. Fitness is the env's own
    return (and success rate), measured on separate evaluation episodes at about
    ``num_checkpoints`` points and at the end; the program's own reward is never used for
    it. Nothing the program does makes this function raise: failures come back in
    :attr:`TrainingRun.failure`.

    :param program: the reward program, or its source (read and checked here, in a child
        process, as every program is: a caller with the text need not parse it itself).
    :param env_id: a batched env id (``rewardlab.envs.registered()``) or any Gymnasium id.
    :param budget: what each seed trains with: env steps (``budget.steps``), batched envs
        (``budget.num_envs``) and PPO's settings (``budget.ppo_kwargs``).
    :param seeds: the seeds, trained one after another.
    :param timeout_s: wall-clock limit of the whole evaluation.
    :param memory_mb: the worker's address-space limit; not applied when ``device`` is a
        CUDA device (the CUDA driver reserves far more address space than it uses).
    :param run_dir: folder for the run's files (TensorBoard logs under ``tensorboard/``, the
        program and ``result.json``); ``None``: a temporary folder, removed afterwards, and
        no TensorBoard logs.
    :param device: torch device for env and networks.

    With ``budget.ppo_kwargs["compile"]`` the worker trains with PPO's compiled graphs,
        which the sandbox's fork server loads once before forking (compiling them into the
        cache the first time: tens of seconds); on a CUDA device, or where the server could
        not load them, the worker trains eagerly and the result's ``compile_note`` says why.
    :param num_checkpoints: how many points to measure at.
    :param eval_episodes: evaluation episodes per checkpoint.
    :param cpu_s: the worker's CPU-time limit (default: see :class:`~rewardlab.llm_reward.sandbox.Limits`).
    :param threads: torch threads in the worker.
    :param static_checks: False trains ``program`` (a :class:`RewardProgram`) without checking
        it here: for one checked for this env already (the search's candidates, read once by
        :mod:`~rewardlab.llm_reward.training.checking`), or to test the sandbox on its own;
        never for a program an LLM wrote that no check has read.
    :param on_final_policy: called as ``on_final_policy(seed, snapshot)`` with each seed's
        last policy (:func:`~rewardlab.llm_reward.training.snapshots.policy_snapshot` data,
        untrusted: rebuild it with :func:`~rewardlab.llm_reward.training.snapshots.load_snapshot`).
    :param description: the data of a description file for the env
        (:func:`rewardlab.envs.description_files.load_description`), used here and in the
        worker; ``None``: the description in use for ``env_id``.
    :param env_description: ``env_id``'s description, when the caller has it already (a
        search computes it once): it is not computed again here.
    :param stop_rule: stop the training early (:mod:`~rewardlab.llm_reward.training.stopping`):
        the fitness of the first seed's checkpoints at the rule's rungs is measured here as
        they stream in, and a training the rule stops is killed there; its result is not
        ``ok``, has the failure kind ``"stopped"``, :attr:`TrainingRun.stopped`, and the
        checkpoints up to the rung. ``None``: train to the end.
    :param on_checkpoint: called as ``on_checkpoint(seed, step, snapshot)`` with each
        checkpoint's policy as it streams in, before the training ends (so a caller stopped
        mid-run keeps the latest); the snapshot is untrusted, as ``on_final_policy``'s is.
    :raises ValueError: bad arguments (unknown env, non-positive budget, non-JSON ``ppo_kwargs``).
    """
    if description is not None:
        use_description(description)
    if isinstance(program, str) and not static_checks:
        raise TypeError("static_checks=False runs a program unchecked: pass a RewardProgram, not its source")
    steps = budget.steps
    payload = _payload(program, env_id, steps, seeds, budget.num_envs, device, budget.ppo_kwargs,
                       num_checkpoints, eval_episodes)
    env_description = env_description if env_description is not None else describe(env_id)
    source = program if isinstance(program, str) else program.source
    on_cuda = str(device).startswith("cuda")
    limits = Limits(timeout_s=timeout_s, memory_mb=None if on_cuda else memory_mb, cpu_s=cpu_s,
                    threads=threads, gpu=on_cuda)
    keep = run_dir is not None
    compile_note = ""
    directory = Path(run_dir) if keep else Path(tempfile.mkdtemp(prefix="rewardlab-eval-"))
    directory.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        if static_checks:  # in a child: nothing in the source makes this process raise or stall
            outcome = check_source(source, env_description)
            if outcome.program is None:
                assert outcome.failure is not None
                return _failed_before_training(outcome.failure, env_id, steps, start,
                                               directory if keep else None, source)
            checked = outcome.program
        else:
            assert isinstance(program, RewardProgram)
            checked = program
        payload["program"] = asdict(checked)
        payload["tensorboard_log"] = os.fspath(directory.resolve() / "tensorboard") if keep else None
        if keep:
            write_private(directory, PROGRAM_FILE, checked.source)
        warm = []
        if payload["ppo_kwargs"].get("compile"):
            if on_cuda:  # a fork server must not touch CUDA before it forks
                payload["ppo_kwargs"]["compile"] = False
                compile_note = ("trained eagerly: PPO's compiled graphs are loaded into the sandbox's "
                                "workers on the CPU only")
            else:
                warm.append(compiled_warm_up(payload, threads))
                payload["compile_warm"] = warm[0][1]
        last: dict[int, Any] = {}
        measured: dict[tuple[int, str], Measured] = {}

        def measure(policy: Any, seed: int) -> Measured:
            # here, in the caller, which never loaded the program (the same seed as in place);
            # a rung's checkpoint was measured as it came, and the same policy measures the same
            last[seed] = policy
            key = (seed, hashlib.sha256(json.dumps(policy, sort_keys=True).encode()).hexdigest())
            if key not in measured:
                measured[key] = measure_snapshot(policy, env_description, payload["ppo_kwargs"], eval_episodes,
                                                 device, seed + 10_000)
            return measured[key]

        watch = _RungWatch(stop_rule, payload["seeds"][0], measure) if stop_rule is not None else None

        def on_progress(message: Any) -> bool:
            if on_checkpoint is not None:
                try:
                    seed, step = int(message["seed"]), _parse_progress(message["progress"]).step
                except Exception:  # noqa: BLE001 - untrusted: the result's parsing reports what is malformed
                    pass
                else:
                    on_checkpoint(seed, step, message["policy"])
            return watch is not None and watch(message)

        run = run_sandboxed(EVALUATION_JOB, payload, directory, limits, preload_for(env_id), warm,
                            temporary=not keep, companion=REWARD_COMPANION,
                            on_progress=on_progress if watch is not None or on_checkpoint is not None else None)
        if watch is not None and watch.stop is not None and run.stopped:
            # what it sent up to the rung, whatever came in before the kill landed
            run.progress = run.progress[:watch.stop.checkpoint + 1]
        result = _result(run, env_id, steps, time.monotonic() - start,
                         os.fspath(directory) if keep else None, checked.source, measure, payload["seeds"],
                         num_checkpoints)
        if watch is not None and watch.stop is not None and run.stopped:
            result.stopped = watch.stop
            result.failure = Failure(STOPPED, watch.stop.reason)
        # what normalising the answer removed (noted when the program was first made) and constants
        given = () if isinstance(program, str) else program.notes
        result.notes = list(dict.fromkeys([*given, *checked.notes, *checked.constant_notes(env_description)]))
        if isinstance(run.result, dict) and isinstance(run.result.get("compile_note"), str):
            compile_note = compile_note or _text(run.result["compile_note"])[:600]
        result.compiled = bool(payload["ppo_kwargs"].get("compile")) and not compile_note
        result.compile_note = compile_note
        if isinstance(run.result, dict) and run.result.get("per_state") is True:
            reason = run.result.get("per_state_reason")
            where = _text(reason)[:300] if isinstance(reason, str) and reason else "Python `if`, `float()`, math on scalars"
            mode = run.result.get("per_state_mode")
            how = PER_STATE_COST.get(mode if isinstance(mode, str) else "loop", PER_STATE_COST["loop"])
            result.notes.append(PER_STATE_NOTE.format(where=where, how=how))
        if on_final_policy is not None and result.ok:
            for seed, policy in last.items():
                on_final_policy(seed, policy)
        if keep:
            write_private(directory, RESULT_FILE, result.to_json())  # the worker is gone by now
        return result
    finally:
        if not keep:
            remove_tree(directory)  # what the worker made there: folders nested past any recursion limit


class _RungWatch:
    """``run_sandboxed``'s ``on_progress`` for early stopping: measures the first seed's
    checkpoints at the rule's rungs as they stream in and asks the candidate's stopper.

    :param rule: the stopping rule.
    :param seed: the first seed (its checkpoints are the ones the rule compares).
    :param measure: ``measure(policy, seed) -> (fitness, success_rate)``.
    """

    def __init__(self, rule: StopRule, seed: int, measure: Callable[[Any, int], Measured]):
        self.stopper = rule.stopper()
        self.seed = seed
        self.measure = measure
        self.count = 0
        self.stop: Stop | None = None

    def __call__(self, message: Any) -> bool:
        # untrusted data: anything malformed ends the watch (the result's parsing reports it)
        if not isinstance(message, dict) or message.get("seed") != self.seed or self.count < 0:
            self.count = -1  # the first seed is over (or the stream is broken): nothing more to decide
            return False
        index, self.count = self.count, self.count + 1
        if index not in self.stopper.rule.rungs:
            return False
        try:
            checkpoint = _parse_progress(message["progress"])
            fitness, _, partial = self.measure(message["policy"], self.seed)
        except Exception:  # noqa: BLE001 - a checkpoint that cannot be read is the result's failure, not this
            self.count = -1
            return False
        self.stop = self.stopper.at(index, checkpoint.step, fitness, partial)
        return self.stop is not None


def _payload(
    program: RewardProgram | str,
    env_id: str,
    steps: int,
    seeds: Sequence[int],
    num_envs: int,
    device: str,
    ppo_kwargs: Mapping[str, Any] | None,
    num_checkpoints: int,
    eval_episodes: int,
) -> dict[str, Any]:
    from rewardlab import envs

    if not isinstance(program, RewardProgram | str):
        raise TypeError(
            f"program must be a RewardProgram (RewardProgram.from_source / from_llm_answer) or its source, got "
            f"{type(program).__name__}"
        )
    envs.check_id(env_id)  # a batched env, or any id Gymnasium can make
    for name, value in (("steps", steps), ("num_envs", num_envs), ("num_checkpoints", num_checkpoints),
                        ("eval_episodes", eval_episodes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
    seeds = list(seeds)
    if not seeds or not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in seeds):
        raise ValueError(f"seeds must be a non-empty sequence of integers, got seeds={seeds!r}")
    ppo_kwargs = dict(ppo_kwargs or {})
    try:
        json.dumps(ppo_kwargs)
    except (TypeError, ValueError) as error:
        raise ValueError(f"ppo_kwargs must be JSON data (it crosses to the sandbox): {error}") from error
    return {
        "env_id": env_id,
        "description": description_data(env_id),
        "steps": steps,
        "seeds": seeds,
        "num_envs": num_envs,
        "device": str(device),
        "ppo_kwargs": ppo_kwargs,
        "num_checkpoints": num_checkpoints,
        "eval_episodes": eval_episodes,
    }


def _failed_before_training(
    failure: Failure, env_id: str, steps: int, start: float, run_dir: Path | None, source: str
) -> TrainingRun:
    return TrainingRun(
        env_id=env_id, ok=False, fitness=None, success_rate=None, curve=[], seeds=[],
        failure=failure, steps=steps, wall_s=time.monotonic() - start, peak_rss_mb=None,
        peak_vm_mb=None, cpu_s=None, run_dir=None if run_dir is None else os.fspath(run_dir), source=source,
    )


def _result(
    run: SandboxRun, env_id: str, steps: int, wall_s: float, run_dir: str | None, source: str,
    measure: Callable[[Any, int], Measured], seeds: Sequence[int],
    num_checkpoints: int | None = None,
) -> TrainingRun:
    failure: Failure | None = None
    seed_runs: list[SeedRun] = []
    usage: dict[str, float | None] = {"peak_rss_mb": None, "peak_vm_mb": None, "cpu_s": None}
    # a job that did not finish (a timeout, a crash) keeps the checkpoints it sent as they were made
    data = run.result if run.result is not None else partial_result(run.progress)
    if data is not None:
        try:
            seed_runs, failure, usage = _parse_job_result(data, measure, seeds, num_checkpoints)
        except Exception as error:  # noqa: BLE001 - whatever the worker's data makes fail here is its failure
            seed_runs, failure = [], Failure("crash", f"the worker returned a malformed result "
                                                      f"({type(error).__name__}: {_text(str(error))[:300]})")
    # What the worker wrote (its error text, the guard's record, its log) is untrusted text.
    if run.error is not None and failure is None:
        failure = Failure(run.error_kind or "crash", _text(run.error), details=_text(run.log_tail))
    if run.violation is not None and (failure is None or failure.kind != "sandbox"):
        failure = Failure("sandbox", _text(run.violation), traceback=failure.traceback if failure else "")
    # trained means every seed ran to the end and was measured: a result without a checkpoint
    # has no fitness, and the search's reports and prompts take a trained one's for granted
    ok = failure is None and bool(seed_runs) and all(seed.wall_s is not None and seed.checkpoints
                                                     for seed in seed_runs)
    if not ok and failure is None:
        failure = Failure("error", "the worker reported no complete training run")
    finals = [seed.checkpoints[-1] for seed in seed_runs if seed.checkpoints] if ok else []
    rates = [point.success_rate for point in finals if point.success_rate is not None]
    return TrainingRun(
        env_id=env_id,
        ok=ok,
        fitness=sum(point.fitness for point in finals) / len(finals) if finals else None,
        success_rate=sum(rates) / len(rates) if rates else None,
        curve=_mean_curve(seed_runs),
        seeds=seed_runs,
        failure=failure,
        steps=steps,
        wall_s=wall_s,
        **usage,
        run_dir=run_dir,
        source=source,
    )


#: the largest magnitude a worker may report (float32's, the rollout's): the search's statistics
#: of what it reports overflowed on 1.7e308 (OverflowError in reward_signals ended the search)
MAX_REPORTED = 3.4028234663852886e38


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a finite number, got {type(value).__name__}")
    # compared, not converted: NaN and the infinities fail, and so does an integer past any
    # float (JSON's integers have no bound; math.isfinite raised OverflowError on 10**400)
    if not -MAX_REPORTED <= value <= MAX_REPORTED:
        raise TypeError(f"expected a finite number no larger than {MAX_REPORTED:.3g}")
    return float(value)


def _optional_number(value: Any) -> float | None:
    return None if value is None else _number(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return sanitize(value[:8000])


#: a component's name as the worker reports it: the program's under ``program/``, the env's
#: own (``extrinsic``) and any other layer's under its prefix, each part a component name
REPORTED_NAME = re.compile(rf"(?:{COMPONENT_NAME.pattern}/)?{COMPONENT_NAME.pattern}")
#: the program's components and as many of the env's own
MAX_REPORTED_COMPONENTS = 2 * MAX_COMPONENTS
#: what a worker reports at a checkpoint, no more and no less
PROGRESS_FIELDS = frozenset(field.name for field in fields(Progress))
#: past the last step a worker may report: the search logs checkpoints to TensorBoard, whose
#: steps are 64-bit integers (a step of 1e300 made the search's logging raise)
MAX_STEP = 2**62


def _component_name(value: Any) -> str:
    if not isinstance(value, str) or not REPORTED_NAME.fullmatch(value):
        raise ValueError(f"a component name is not an identifier (with at most one prefix such as "
                         f"{COMPONENT_PREFIX!r}): {sanitize(str(value))[:80]!r}")
    return value


def _parse_progress(data: Any) -> Progress:
    """A worker's :class:`Progress` point, checked: it names exactly the fields of one (a
    fitness it reports is refused, never read)."""
    if not isinstance(data, dict) or set(data) != PROGRESS_FIELDS:
        raise ValueError(f"a progress point holds {sorted(map(str, data))[:8] if isinstance(data, dict) else data!r:.80}, "
                         f"not {sorted(PROGRESS_FIELDS)}")
    components = data["components"]
    if not isinstance(components, dict):
        raise TypeError("components must be a dict")
    if len(components) > MAX_REPORTED_COMPONENTS:
        raise ValueError(f"{len(components)} components; at most {MAX_REPORTED_COMPONENTS}")
    step = int(_number(data["step"]))
    if not 0 <= step < MAX_STEP:  # TensorBoard's steps are 64-bit integers
        raise ValueError(f"a checkpoint's step {step:.3g} is not between 0 and {MAX_STEP:.3g}")
    return Progress(
        step=step,
        train_return=_optional_number(data["train_return"]),
        components={_component_name(name): _number(value) for name, value in components.items()},
        reward=_optional_number(data["reward"]),
    )


def _parse_job_result(
    data: Mapping[str, Any], measure: Callable[[Any, int], Measured], seeds: Sequence[int],
    num_checkpoints: int | None = None,
) -> tuple[list[SeedRun], Failure | None, dict[str, float | None]]:
    """Read the worker's (untrusted) JSON into records, checking every type; measure the
    fitness of every checkpoint from the policy it shipped. The runs must be the requested
    ``seeds``, in order (a run may be missing at the end, after a failure): the caller
    measures with the seed it asked for, never one the worker picked; and a run holds at
    most the ``num_checkpoints`` it was asked for: each costs the caller evaluation
    episodes, outside the worker's time limit."""
    seed_runs = []
    if not isinstance(data["seeds"], list) or len(data["seeds"]) > len(seeds):
        raise ValueError("the worker reported more training runs than it was given seeds")
    for run, requested in zip(data["seeds"], seeds):
        seed = int(_number(run["seed"]))
        if seed != requested:
            raise ValueError(f"the worker reported seed {seed} for the run of seed {requested}")
        if num_checkpoints is not None and len(run["progress"]) > num_checkpoints:
            raise ValueError(f"the worker reported more than the {num_checkpoints} checkpoints it was asked for")
        points = [_parse_progress(point) for point in run["progress"]]
        policies = run["policies"]
        if not isinstance(policies, list) or len(policies) != len(points):
            raise ValueError("the worker did not ship one policy per checkpoint")
        checkpoints = [Checkpoint.measured(point, *measure(policy, seed)) for point, policy in zip(points, policies)]
        seed_runs.append(SeedRun(seed=seed, checkpoints=checkpoints, wall_s=_optional_number(run["wall_s"])))
    raw_failure = data["failure"]
    failure = None
    if raw_failure is not None:
        failure = Failure(
            kind=_text(raw_failure["kind"]),
            reason=_text(raw_failure["reason"]),
            traceback=_text(raw_failure["traceback"]),
        )
    usage = {name: _optional_number(data.get(name)) for name in ("peak_rss_mb", "peak_vm_mb", "cpu_s")}
    return seed_runs, failure, usage


def _mean_curve(seed_runs: Sequence[SeedRun]) -> list[Checkpoint]:
    curve = []
    length = max((len(run.checkpoints) for run in seed_runs), default=0)
    for index in range(length):
        points = [run.checkpoints[index] for run in seed_runs if len(run.checkpoints) > index]
        names = sorted({name for point in points for name in point.components})
        rates = [p.success_rate for p in points if p.success_rate is not None]
        train = [p.train_return for p in points if p.train_return is not None]
        rewards = [p.reward for p in points if p.reward is not None]
        partials = [p.partial_success for p in points if p.partial_success is not None]
        curve.append(
            Checkpoint(
                step=round(sum(p.step for p in points) / len(points)),
                fitness=sum(p.fitness for p in points) / len(points),
                success_rate=sum(rates) / len(rates) if rates else None,
                train_return=sum(train) / len(train) if train else None,
                components={
                    name: _mean([p.components[name] for p in points if name in p.components])
                    for name in names
                },
                reward=_mean(rewards) if rewards else None,
                partial_success=_mean(partials) if partials else None,
            )
        )
    return curve


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
