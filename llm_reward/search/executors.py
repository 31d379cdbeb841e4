"""Where candidate evaluations run: local processes (default) or a Ray cluster.

Every evaluation is :func:`rewardlab.llm_reward.evaluate`, which already runs the program in its own
sandboxed worker process, so the local executor only needs threads that wait on those
processes: ``workers`` evaluations train at once, each in its own worker process forked
from the sandbox's one fork server. The Ray executor (``--executor ray --address ADDR``,
the ``ray`` extra) runs the same call as a Ray task on any node of a cluster, in a
temporary folder there, and brings the result and the run's files (TensorBoard logs,
program, ``result.json``) back into the run directory, so the search's outputs are the
same. Nodes need rewardlab installed, as for any Ray task.
"""

from __future__ import annotations

import abc
import itertools
import os
import queue
import stat
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.common.files import walk_files
from rewardlab.llm_reward.programs.program import RewardProgram
from rewardlab.llm_reward.sandbox.isolation import UNSAFE_OPT_OUT, kernel_support
from rewardlab.llm_reward.sandbox.runner import remove_tree
from rewardlab.llm_reward.training import TrainingRun, evaluate
from rewardlab.llm_reward.training.failures import cut
from rewardlab.llm_reward.training.stopping import StopRule

__all__ = ["CallbackError", "EvalTask", "Executor", "LocalExecutor", "RayExecutor", "make_executor", "node_sandbox", "run_task"]

# Files larger than this are not brought back from Ray nodes (worker logs of runaway programs).
MAX_RETURNED_FILE_BYTES = 32 * 2**20


@dataclass(frozen=True)
class EvalTask:
    """One evaluation: a program, its env and budget, and the folder for its files.

    :param key: the journal key of what is evaluated.
    :param source: the program's source.
    :param env_id: the env.
    :param steps: env steps per seed.
    :param seeds: the training seeds.
    :param run_dir: the folder for the run's files in the run directory (replaced).
    :param num_envs: batched envs per training run.
    :param ppo_kwargs: PPO's hyperparameters.
    :param num_checkpoints: fitness measurements per seed.
    :param eval_episodes: evaluation episodes per measurement.
    :param timeout_s: wall-clock limit of the evaluation.
    :param description: the data of the env's description file, if the search has one.
    :param stop_rule: its early-stopping rule as JSON data
        (:meth:`~rewardlab.llm_reward.training.stopping.StopRule.to_dict`), or ``None``: trained
        to the end.
    :param program: the program as the search checked it for this env (a
        :class:`~rewardlab.llm_reward.programs.program.RewardProgram` as a dict), trained as it
        is; ``None``: ``source`` is read and checked by the evaluation.
    """

    key: str
    source: str
    env_id: str
    steps: int
    seeds: tuple[int, ...]
    run_dir: str
    num_envs: int = 8
    ppo_kwargs: dict[str, Any] = field(default_factory=dict)
    num_checkpoints: int = 10
    eval_episodes: int = 10
    timeout_s: float = 1800.0
    description: dict[str, Any] | None = None
    stop_rule: dict[str, Any] | None = None
    program: dict[str, Any] | None = None


def run_task(task: EvalTask, run_dir: str | os.PathLike[str] | None = None) -> TrainingRun:
    """Evaluate ``task`` with :func:`rewardlab.llm_reward.evaluate` (sandboxed, one torch thread).

    A folder left by an interrupted evaluation of the same task is removed first, so a
    resumed search does not mix two runs' TensorBoard logs.

    :param task: what to evaluate.
    :param run_dir: where to put the files instead of ``task.run_dir``.
    """
    directory = Path(run_dir if run_dir is not None else task.run_dir)
    remove_tree(directory)
    # a program the search checked is trained as it is; a source is read and checked by evaluate, in a child
    checked = RewardProgram.from_dict(task.program) if task.program is not None else None
    return evaluate(
        checked if checked is not None else task.source, task.env_id, steps=task.steps, seeds=task.seeds,
        timeout_s=task.timeout_s, run_dir=directory, num_envs=task.num_envs,
        ppo_kwargs=task.ppo_kwargs, num_checkpoints=task.num_checkpoints,
        eval_episodes=task.eval_episodes, threads=1, description=task.description,
        stop_rule=StopRule.from_dict(task.stop_rule) if task.stop_rule is not None else None,
        static_checks=checked is None,
    )  # fmt: skip


class CallbackError(RuntimeError):
    """A submit's ``on_done`` raised (the journal could not be written, say): the caller's
    failure, not the evaluation's."""


class Executor(abc.ABC):
    """Runs evaluations concurrently; :meth:`submit` returns a future of the result.

    Evaluations start in the order they were submitted, those submitted with
    ``background=True`` only when no other evaluation waits for a slot: work that can wait
    (the references' final seeds, which do not depend on the search) fills the slots the
    search's iterations leave idle (a stopped candidate's, or all of them while an iteration
    waits for its slowest candidate or for the LLM) instead of adding its time at the end.

    :param workers: how many evaluations run at once.
    :param thread_prefix: name prefix of the threads that wait on the evaluations.
    """

    def __init__(self, workers: int, thread_prefix: str):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got workers={workers!r}")
        self.workers = workers
        self._closed = False
        self._queue_lock = threading.Lock()  # a submit and a shutdown do not interleave
        # (lane, order, future, run): lane 0 before lane 1, each in submission order; None ends a thread
        self._queue: queue.PriorityQueue[tuple[int, int, Any, Any]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._threads = [threading.Thread(target=self._work, name=f"{thread_prefix}_{index}", daemon=True)
                         for index in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, task: EvalTask, on_start: Callable[[], None] | None = None, background: bool = False,
               on_done: Callable[[TrainingRun], None] | None = None) -> Future[TrainingRun]:
        """Queue ``task``; it starts when one of the ``workers`` slots is free.

        :param task: what to evaluate.
        :param on_start: called when the evaluation starts (for progress displays).
        :param background: start it only when nothing else waits for a slot.
        :param on_done: called with the result before the future has it (to journal it
            even if no one is waiting for it yet).
        """

        def run() -> TrainingRun:
            if on_start is not None:
                on_start()
            result = self._run(task)
            if on_done is not None:
                try:
                    on_done(result)
                except Exception as error:  # noqa: BLE001 - not the evaluation's failure: the caller's
                    raise CallbackError(f"{type(error).__name__}: {error}") from error
            return result

        future: Future[TrainingRun] = Future()
        with self._queue_lock:
            if self._closed:
                raise RuntimeError("this executor was shut down; make a new one")
            self._queue.put((1 if background else 0, next(self._order), future, run))
        return future

    def _work(self) -> None:
        while True:
            _, _, future, run = self._queue.get()
            if future is None:
                return
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while it waited
            try:
                future.set_result(run())
            except BaseException as error:  # noqa: BLE001 - the caller sees it through the future
                future.set_exception(error)

    @abc.abstractmethod
    def _run(self, task: EvalTask) -> TrainingRun:
        """Evaluate ``task`` now, in the calling thread (which waits for the result)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where evaluations run, for the report."""

    def shutdown(self) -> None:
        """Stop accepting work and release what the executor holds: what waits is cancelled,
        what runs finishes in its thread."""
        with self._queue_lock:
            self._closed = True
            while True:
                try:
                    _, _, future, _ = self._queue.get_nowait()
                except queue.Empty:
                    break
                if future is not None and future.cancel():
                    future.set_running_or_notify_cancel()  # so that as_completed sees it as done
            for _ in self._threads:
                self._queue.put((2, next(self._order), None, None))


class LocalExecutor(Executor):
    """Evaluations in sandboxed worker processes on this machine, ``workers`` at a time.

    :param workers: how many evaluations train at once (one torch thread each).
    """

    def __init__(self, workers: int):
        super().__init__(workers, "rewardlab-eval")

    def _run(self, task: EvalTask) -> TrainingRun:
        return run_task(task)

    def describe(self) -> str:
        """``local processes, W at a time``."""
        return f"local sandboxed processes, {self.workers} at a time"


def evaluate_remotely(task_data: dict[str, Any]) -> dict[str, Any]:
    """The Ray task: evaluate in a temporary folder on the node, return the result and files.

    :param task_data: an :class:`EvalTask` as a dict.
    :return: ``{"result": TrainingRun dict, "files": {relative path: bytes}}``.
    """
    task = EvalTask(**{**task_data, "seeds": tuple(task_data["seeds"])})
    folder = tempfile.mkdtemp(prefix="rewardlab-ray-")
    try:
        directory = Path(folder) / "run"
        result = run_task(task, directory)
        files = {
            os.fspath(path.relative_to(directory)): path.read_bytes()
            for path in _run_files(directory)
            if _plain_file_inside(path, directory)
        }
    finally:
        remove_tree(folder)  # the worker's folders, nested past any recursion limit
    return {"result": result.to_dict(), "files": files}


def _run_files(directory: Path) -> list[Path]:
    """What lies beneath ``directory`` but folders, found without recursion and into no
    linked folder: a worker may nest folders past Python's recursion limit (red-team finding)."""
    return sorted(folder / entry.name for folder, entry in walk_files(directory))


def _plain_file_inside(path: Path, directory: Path) -> bool:
    """A regular file of the run's own, not a link the worker planted (to a secret on the
    node), and small enough to bring back."""
    try:
        if any(part.is_symlink() for part in (path, *path.parents) if part != directory and directory in part.parents):
            return False
        info = os.lstat(path)
    except OSError:  # a path past the kernel's limit
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size <= MAX_RETURNED_FILE_BYTES


def node_sandbox() -> dict[str, Any]:
    """The Ray task that asks a node whether it can run the sandbox.

    :return: ``{"node": its Ray node id, "missing": {feature: why}, "opted_out": bool}``
        (see :func:`~rewardlab.llm_reward.sandbox.isolation.kernel_support`).
    """
    import ray

    missing = {name: why for name, why in kernel_support().items() if why is not None}
    return {"node": ray.get_runtime_context().get_node_id(), "missing": missing,
            "opted_out": os.environ.get(UNSAFE_OPT_OUT) == "1"}


#: the most times one evaluation is sent again after the node running it was lost
MAX_NODE_LOSSES = 3
#: how long a node may take to say whether it can run the sandbox
PROBE_TIMEOUT_S = 120.0


class RayExecutor(Executor):
    """Evaluations as Ray tasks, on a cluster (``address``) or a local Ray instance.

    Each node with CPUs is asked first whether it can run the sandbox (:func:`node_sandbox`):
    one that lacks a kernel feature is refused, with the reason (:attr:`refused`, and the
    report through :meth:`describe`), and never gets an evaluation, unless this process runs
    with ``REWARDLAB_UNSAFE_NO_ISOLATION=1`` (then the nodes may opt out too). Nodes that join
    later are asked when they are first seen. Each evaluation is sent to one accepted node
    (the one with the fewest in flight); if that node is lost while it runs (its worker or
    raylet died), the node gets no more work and the evaluation is sent to another one. An
    evaluation whose result came back is never sent again (:attr:`submissions` counts).

    :param workers: how many evaluations are in flight at once.
    :param address: the cluster's address (``ray://host:10001`` or ``host:6379``); ``None``
        starts a local instance (or uses the one already initialised in this process).
    :param init_kwargs: more arguments of ``ray.init`` (e.g. ``num_cpus`` for a local instance).
    :raises ValueError: Ray is not installed, the cluster cannot be reached, or no node of it
        can run the sandbox (the message gives each node's reason).
    """

    def __init__(self, workers: int, address: str | None = None, init_kwargs: dict[str, Any] | None = None):
        super().__init__(workers, "rewardlab-ray")
        try:
            self._connect(address, init_kwargs)
        except BaseException:
            super().shutdown()  # the worker threads started above end with it
            raise

    def _connect(self, address: str | None, init_kwargs: dict[str, Any] | None) -> None:
        try:
            import ray
        except ImportError as error:
            raise ValueError(
                "--executor ray needs Ray: pip install 'rewardlab[ray]' (on every node of the cluster)"
            ) from error
        self._ray = ray
        self.address = address
        if not ray.is_initialized():
            try:
                ray.init(address=address, logging_level="WARNING", **dict(init_kwargs or {}))
            except ConnectionError as error:
                raise ValueError(f"cannot reach the Ray cluster at --address {address!r}: {error}") from error
        # Ray's own retries would send a lost evaluation back to the node it was pinned to
        self._remote = ray.remote(num_cpus=1, max_retries=0)(evaluate_remotely)
        self._probe = ray.remote(num_cpus=0, max_retries=0)(node_sandbox)
        self._lock = threading.Lock()
        #: the nodes that run evaluations: node id -> how many are in flight there
        self.accepted: dict[str, int] = {}
        #: the nodes that get none: node id -> why (no sandbox there, or lost mid-search)
        self.refused: dict[str, str] = {}
        #: how many times each evaluation (by its run folder) was sent to a node
        self.submissions: Counter[str] = Counter()
        self._refresh_nodes()
        if not self.accepted:
            reasons = "; ".join(f"{node}: {why}" for node, why in self.refused.items()) or "it has no node with CPUs"
            raise ValueError(f"no node of the Ray cluster can run the sandbox ({reasons}); run on Linux nodes "
                             "with user namespaces, Landlock and libseccomp, or use --executor local")

    def _refresh_nodes(self) -> None:
        """Ask the nodes not seen before whether they can run the sandbox (the caller holds no lock)."""
        with self._lock:
            seen = set(self.accepted) | set(self.refused)
        new = [node["NodeID"] for node in self._ray.nodes()
               if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= 1 and node["NodeID"] not in seen]
        if not new:
            return
        strategy = self._ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
        probes = {node: self._probe.options(scheduling_strategy=strategy(node, soft=False)).remote() for node in new}
        opted_out = os.environ.get(UNSAFE_OPT_OUT) == "1"
        for node, probe in probes.items():
            try:
                answer = self._ray.get(probe, timeout=PROBE_TIMEOUT_S)
            except Exception as error:  # noqa: BLE001 - any failure to answer refuses the node
                reason = f"it did not say whether it can run the sandbox ({type(error).__name__}: {error})"
            else:
                missing = answer.get("missing") or {}
                reason = None
                if missing and not (opted_out and answer.get("opted_out")):
                    details = "; ".join(f"{name}: {why}" for name, why in missing.items())
                    reason = f"it cannot run the sandbox ({details})"
            with self._lock:
                if reason is None:
                    self.accepted.setdefault(node, 0)
                else:
                    self.refused[node] = cut(reason, 500)

    def _pick_node(self) -> str:
        self._refresh_nodes()
        with self._lock:
            if not self.accepted:
                reasons = "; ".join(f"{node}: {why}" for node, why in self.refused.items())
                raise RuntimeError(f"no node of the Ray cluster is left to run evaluations ({reasons})")
            node = min(self.accepted, key=lambda name: (self.accepted[name], name))
            self.accepted[node] += 1
            return node

    def _run(self, task: EvalTask) -> TrainingRun:
        exceptions = self._ray.exceptions
        strategy = self._ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
        losses = []
        while True:
            node = self._pick_node()
            with self._lock:
                self.submissions[task.run_dir] += 1
            try:
                data = self._ray.get(self._remote.options(scheduling_strategy=strategy(node, soft=False))
                                     .remote(asdict(task)))
                break
            except (exceptions.RayTaskError, exceptions.OutOfMemoryError, exceptions.TaskCancelledError):
                raise  # the evaluation itself raised, or used too much memory: its failure, not the node's
            except exceptions.RayError as error:  # the worker or the node running it is gone
                losses.append(f"{node}: {type(error).__name__}")
                with self._lock:
                    self.accepted.pop(node, None)
                    self.refused[node] = cut(f"lost while it ran an evaluation ({type(error).__name__}: {error})", 500)
                if len(losses) > MAX_NODE_LOSSES:
                    raise RuntimeError(f"the evaluation was lost with {len(losses)} nodes: {', '.join(losses)}") from error
            finally:
                with self._lock:
                    if node in self.accepted:
                        self.accepted[node] -= 1
        directory = Path(task.run_dir)
        remove_tree(directory)
        for relative, content in data["files"].items():
            path = (directory / relative).resolve()
            if directory.resolve() not in path.parents:
                continue  # only files inside the candidate's folder
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        result = TrainingRun.from_dict(data["result"])
        result.run_dir = os.fspath(directory)
        return result

    def describe(self) -> str:
        """``Ray cluster at ADDR, W in flight``, and the nodes refused, with why."""
        where = f"Ray cluster at {self.address}" if self.address else "a local Ray instance"
        text = f"{where}, {self.workers} evaluations in flight"
        with self._lock:
            refused = dict(self.refused)
        if refused:
            text += "; nodes refused: " + "; ".join(f"{node[:12]} ({why})" for node, why in refused.items())
        return text

    def shutdown(self) -> None:
        """Stop submitting and disconnect from Ray."""
        super().shutdown()
        self._ray.shutdown()


def make_executor(kind: str, workers: int, address: str | None = None) -> Executor:
    """The executor the CLI's ``--executor`` names.

    :param kind: ``"local"`` or ``"ray"``.
    :param workers: concurrent evaluations.
    :param address: the Ray cluster's address (``ray`` only).
    :raises ValueError: an unknown kind, ``address`` without Ray, or Ray problems.
    """
    if kind == "local":
        if address is not None:
            raise ValueError("--address is the Ray cluster's address; pass it with --executor ray")
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(workers, address)
    raise ValueError(f"unknown executor {kind!r}; choose local or ray")
