"""The job's side of the companion's channel reads every answer strictly: whatever a
program that got out of Python's checks sends is that candidate's failure (a
ProgramError), never the job's crash and never a reward the checks would refuse."""

from __future__ import annotations

import json
import os
import socket
import struct

import pytest
import torch

from rewardlab import llm_reward
from rewardlab.llm_reward.programs.program import ProgramError, RewardFunction, RewardProgram
from rewardlab.llm_reward.training.reward_process import RemoteReward, serve_rewards

PROGRAM = RewardProgram(source="def compute_reward(theta):\n    return theta, {'angle': theta}\n",
                        function_name="compute_reward", parameters=("theta",))


class NoGuard:
    def changed_modules(self) -> None:
        return None


def frame(header: object, block: bytes = b"") -> bytes:
    data = json.dumps(header).encode()
    return struct.pack(">II", len(data), len(block)) + data + block


def remote_with_answers(answers: list[bytes]) -> tuple[RemoteReward, socket.socket]:
    """A RemoteReward whose companion is a child process that sends ``answers`` (the first
    is the loading frame), reading one request before each later answer."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the forged companion
        try:
            ours.close()
            theirs.sendall(answers[0])
            for answer in answers[1:]:
                theirs.recv(1 << 20)
                theirs.sendall(answer)
            theirs.recv(1 << 20)
        finally:
            os._exit(0)
    theirs.close()
    return RemoteReward(ours, pid, PROGRAM, llm_reward.describe("CartPole-v1")), ours


def step(remote: RemoteReward, num_envs: int = 2) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    obs = torch.zeros((num_envs, 4))
    return remote(obs, torch.zeros(num_envs, dtype=torch.int64), obs, torch.zeros(num_envs, dtype=torch.bool))


OK = frame({"ok": True})
VALUES = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).numpy().tobytes()


@pytest.mark.parametrize(("answer", "message"), [
    (frame({"ok": True, "names": [["x"]]}, VALUES), "malformed component names"),
    (frame({"ok": True, "names": ["x y"]}, VALUES), "malformed component names"),
    (frame({"ok": True, "names": ["a", "a"]}, VALUES + VALUES[:8]), "malformed component names"),
    (frame({"ok": True, "names": ["x"]}, VALUES[:12]), "answered 12 bytes"),
    (frame({"ok": True, "names": ["x"]}, torch.tensor([[1.0, float("nan")], [0.0, 0.0]]).numpy().tobytes()),
     "non-finite"),
    (frame({"ok": True, "names": ["x"]}, torch.tensor([[1e30, 0.0], [0.0, 0.0]]).numpy().tobytes()), "past"),
    (frame([1, 2]), "malformed message"),
    (b"\xff" * 8, "malformed message"),
    (frame({"ok": False, "kind": "limit\x1b[2J", "reason": 7}), "the reward program failed"),
])
def test_a_malformed_answer_is_the_programs_failure(answer: bytes, message: str) -> None:
    remote, _ = remote_with_answers([OK, answer])
    with pytest.raises(ProgramError) as error:
        step(remote)
    assert message in error.value.reason
    assert error.value.kind == "program"
    remote.close()


def test_a_well_formed_answer_is_the_reward_and_its_components() -> None:
    remote, _ = remote_with_answers([OK, frame({"ok": True, "names": ["x"], "per_state": True,
                                                "per_state_mode": ["loop"]}, VALUES)])
    reward, components = step(remote)
    assert reward.tolist() == [1.0, 2.0] and components["x"].tolist() == [3.0, 4.0]
    assert remote.per_state and remote.per_state_mode == "loop"  # a mode it cannot look up is the loop
    remote.close()


def test_a_companion_that_exits_or_hangs_up_is_the_programs_failure() -> None:
    remote, _ = remote_with_answers([OK])  # exits after the loading frame and one request
    with pytest.raises(ProgramError, match="ended without answering: it exited with code 0"):
        step(remote)


def test_the_real_companion_answers_what_the_program_computes() -> None:
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            description = llm_reward.describe("CartPole-v1")
            serve_rewards(lambda: RewardFunction(PROGRAM, description), theirs, NoGuard())
        finally:
            os._exit(0)
    theirs.close()
    remote = RemoteReward(ours, pid, PROGRAM, llm_reward.describe("CartPole-v1"))
    obs = torch.tensor([[0.0, 0.0, 0.1, 0.0], [0.0, 0.0, -0.2, 0.0]])
    reward, components = remote(obs, torch.zeros(2, dtype=torch.int64), obs, torch.zeros(2, dtype=torch.bool))
    assert reward.tolist() == pytest.approx([0.1, -0.2]) and list(components) == ["angle"]
    remote.close()
