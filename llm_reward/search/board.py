"""TensorBoard output of a search, next to the PPO logs every candidate's training writes.

Each trained candidate's ``train/tensorboard/PPO_k`` folders (one per seed, the keys of
``rewardlab train``: ``rollout/ep_rew_mean``, ``reward/<c>``, ``episode/<c>``) get one more
event file with the search's view of that run:

- ``search/fitness`` and ``search/program_reward`` at every checkpoint;
- ``search/reward_fitness_corr`` and ``search/reward_hacking`` (0 or 1) at the last one;
- ``search/prescreen_tau`` when the candidate was prescreened.

``OUT/tensorboard/search`` holds the run's own curves against the iteration:
``search/best_fitness``, ``search/iteration_best_fitness``, ``search/failures``,
``search/tokens`` and ``search/cost_usd``.
"""

from __future__ import annotations

import re
from pathlib import Path

from rewardlab.llm_reward.search.reflection import reward_signals
from rewardlab.llm_reward.training import TrainingRun

__all__ = ["SEARCH_SUFFIX", "log_candidate", "log_iteration"]

SEARCH_SUFFIX = ".search"


def _seed_folders(tensorboard: Path) -> list[Path]:
    """The PPO run folders of an evaluation, in the order its seeds trained.

    The worker made them: a link (to a folder anywhere) is not followed, so this process
    writes only inside the run directory."""
    if tensorboard.is_symlink() or not tensorboard.is_dir():
        return []
    inside = tensorboard.resolve()
    folders = [path for path in tensorboard.glob("*_*") if re.search(r"_\d+$", path.name)
               and not path.is_symlink() and path.is_dir() and path.resolve().parent == inside]
    return sorted(folders, key=lambda path: int(path.name.rsplit("_", 1)[1]))


def log_candidate(result: TrainingRun, prescreen_tau: float | None = None) -> None:
    """Add the search's scalars to each seed's TensorBoard folder of a trained candidate.

    Does nothing when the folders already hold them (a resumed search) or there are none.

    :param result: the candidate's evaluation (its ``run_dir`` holds ``tensorboard/``).
    :param prescreen_tau: its prescreen score, if any.
    """
    if result.run_dir is None:
        return
    from torch.utils.tensorboard import SummaryWriter

    folders = _seed_folders(Path(result.run_dir) / "tensorboard")
    for folder, seed_run in zip(folders, result.seeds):
        if any(folder.glob(f"*{SEARCH_SUFFIX}")) or not seed_run.checkpoints:
            continue
        signals = reward_signals(seed_run.checkpoints)
        writer = SummaryWriter(log_dir=str(folder), filename_suffix=SEARCH_SUFFIX)
        for point in seed_run.checkpoints:
            writer.add_scalar("search/fitness", point.fitness, point.step)
            if point.reward is not None:
                writer.add_scalar("search/program_reward", point.reward, point.step)
        last = seed_run.checkpoints[-1].step
        if signals.correlation is not None:
            writer.add_scalar("search/reward_fitness_corr", signals.correlation, last)
        writer.add_scalar("search/reward_hacking", float(signals.hacking), last)
        if prescreen_tau is not None:
            writer.add_scalar("search/prescreen_tau", prescreen_tau, last)
        writer.close()


def log_iteration(
    folder: Path,
    iteration: int,
    best_fitness: float | None,
    iteration_best: float | None,
    failures: int,
    tokens: int,
    cost_usd: float | None,
) -> None:
    """The search's curves at one iteration, once (a marker file keeps a resumed search from
    writing them twice).

    :param folder: ``OUT/tensorboard/search``.
    :param iteration: 0-based iteration (the x axis).
    :param best_fitness: the best fitness so far.
    :param iteration_best: the best fitness of this iteration.
    :param failures: candidates of this iteration that failed or were rejected.
    :param tokens: tokens used so far.
    :param cost_usd: cost so far (``None``: unknown).
    """
    from torch.utils.tensorboard import SummaryWriter

    marker = folder / f"iteration_{iteration:03d}.logged"
    if marker.exists():
        return
    writer = SummaryWriter(log_dir=str(folder))
    if best_fitness is not None:
        writer.add_scalar("search/best_fitness", best_fitness, iteration)
    if iteration_best is not None:
        writer.add_scalar("search/iteration_best_fitness", iteration_best, iteration)
    writer.add_scalar("search/failures", failures, iteration)
    writer.add_scalar("search/tokens", tokens, iteration)
    if cost_usd is not None:
        writer.add_scalar("search/cost_usd", cost_usd, iteration)
    writer.close()
    marker.touch()
