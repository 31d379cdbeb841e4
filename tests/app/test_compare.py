"""``rewardlab compare`` on run folders from elsewhere: what they hold is read as data."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from rewardlab.app.compare import compare


def test_an_event_file_that_is_no_regular_file_is_never_opened(tmp_path: Path) -> None:
    # a shared folder's FIFO (a tar archive carries one), or a link to one (or to a terminal),
    # named like an event file: TensorBoard's reader opened it and compare waited forever
    good, planted = tmp_path / "good" / "tb", tmp_path / "planted" / "tb"
    for folder in (good, planted):
        writer = SummaryWriter(str(folder))
        writer.add_scalar("rollout/ep_rew_mean", 1.0, 0)
        writer.add_scalar("rollout/ep_rew_mean", 2.0, 10)
        writer.close()
    os.mkfifo(planted / "events.out.tfevents.0.fifo")
    os.mkfifo(tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", good.parent / "events.out.tfevents.0.link")
    outcome: dict[str, object] = {"errors": []}

    def run() -> None:
        outcome["rows"] = compare([good], "rollout/ep_rew_mean", tmp_path / "out", None)
        for folder in (tmp_path / "planted", tmp_path / "good"):
            try:
                compare([folder], "rollout/ep_rew_mean", tmp_path / "out", None)
            except ValueError as error:
                outcome["errors"].append(str(error))

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(30)
    assert not reader.is_alive(), "compare waits on a file that is no regular file"
    rows = outcome["rows"]
    assert isinstance(rows, list) and len(rows) == 1 and rows[0]["final_mean"] == pytest.approx(2.0)
    fifo, link = outcome["errors"]
    assert "events.out.tfevents.0.fifo is named like a TensorBoard event file but is no regular file" in fifo
    assert "events.out.tfevents.0.link is named like" in link
