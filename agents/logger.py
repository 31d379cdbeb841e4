"""TensorBoard output for the agents, laid out the way SB3 lays it out."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping


class TensorBoardLogger:
    """Writes scalars to ``<log_dir>/<run_name>_<k>``, one numbered folder per run, as SB3 does.

    ``torch.utils.tensorboard`` is imported here, on first use, because importing it takes
    a second and most runs without a log directory never need it.

    Example::

        logger = TensorBoardLogger("runs", "PPO")
        logger.record({"rollout/ep_rew_mean": 21.5}, step=2048)
        logger.close()

    :param log_dir: the parent folder (created if missing).
    :param run_name: prefix of the run folder.
    :param new_run: start a new numbered folder; False appends to the latest ``run_name_k``
        (SB3's ``reset_num_timesteps=False``), or starts ``run_name_1`` if there is none.
    """

    def __init__(
        self, log_dir: str | os.PathLike[str], run_name: str, new_run: bool = True
    ) -> None:
        from torch.utils.tensorboard import SummaryWriter

        latest = latest_run_id(log_dir, run_name)
        run_id = latest + 1 if new_run or latest == 0 else latest
        self.path = os.path.join(os.fspath(log_dir), f"{run_name}_{run_id}")
        self._writer = SummaryWriter(log_dir=self.path)

    def record(self, scalars: Mapping[str, float], step: int) -> None:
        """Write each scalar at ``step`` (env steps).

        :param scalars: tag -> value.
        :param step: the x-axis value.
        """
        for tag, value in scalars.items():
            self._writer.add_scalar(tag, value, step)
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()


def latest_run_id(log_dir: str | os.PathLike[str], run_name: str) -> int:
    """The largest ``k`` among folders ``<run_name>_<k>`` in ``log_dir`` (0 if none).

    :param log_dir: the parent folder.
    :param run_name: prefix of the run folders.
    """
    if not os.path.isdir(log_dir):
        return 0
    pattern = re.compile(rf"^{re.escape(run_name)}_(\d+)$")
    ids = [int(m.group(1)) for entry in os.listdir(log_dir) if (m := pattern.match(entry))]
    return max(ids, default=0)
