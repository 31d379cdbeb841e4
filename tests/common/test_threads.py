"""rewardlab.common.threads: a block at its own torch thread count, and the caller's back after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from rewardlab.common.threads import ThreadsSetting, at_own_threads, check_threads, torch_threads


@pytest.fixture
def two_threads() -> Iterator[None]:
    """torch at two intra-op threads, as a user may have set it; the session's count after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


def test_the_block_runs_at_its_count_and_the_callers_comes_back(two_threads: None) -> None:
    with torch_threads(1):
        assert torch.get_num_threads() == 1
        with torch_threads(1):  # nested at the same count
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_the_callers_count_comes_back_when_the_block_raises(two_threads: None) -> None:
    with pytest.raises(KeyError), torch_threads(1):
        raise KeyError("inside")
    assert torch.get_num_threads() == 2


def test_none_and_other_devices_leave_torch_alone(two_threads: None) -> None:
    with torch_threads(None):
        assert torch.get_num_threads() == 2
    with torch_threads(1, "cuda"):  # the device is only named, nothing runs on it
        assert torch.get_num_threads() == 2
    with torch_threads(1, torch.device("meta")):
        assert torch.get_num_threads() == 2


@pytest.mark.parametrize("threads", [0, -1, 1.5, "1", True])
def test_a_bad_count_names_the_value(threads: object) -> None:
    with pytest.raises(ValueError, match=rf"threads={threads!r} is not a thread count"):
        check_threads(threads)  # type: ignore[arg-type]


def test_a_method_runs_at_its_objects_setting(two_threads: None) -> None:
    class Loop(ThreadsSetting):
        device = torch.device("cpu")

        @at_own_threads
        def run(self) -> int:
            return torch.get_num_threads()

    loop = Loop()
    assert loop.threads == 1 and loop.run() == 1
    loop.threads = None
    assert loop.run() == 2
    loop.threads = 2
    with torch_threads(1):
        assert loop.run() == 2 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="threads=0"):
        loop.threads = 0
