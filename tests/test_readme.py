"""The README's examples, as written.

Every ```python block runs verbatim in a fresh folder, with two test-only changes made
from outside the code: training calls are cut to a few thousand steps, and the local LLM
the LLM-policy example asks (``ollama:...``) is a scripted server reached through
``REWARDLAB_BASE_URL``, as the README says a user points it elsewhere. Every
``rewardlab`` command of the ```bash blocks is parsed by the real command line, so a
renamed or missing flag fails here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from llm_servers import ScriptedChatServer

from rewardlab.app.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"
STEP_CAP = 2_048


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), re.M | re.S)


def commands() -> list[list[str]]:
    found = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            command: list[str] = []
            for word in [*shlex.split(line, comments=True), "&&"]:
                if word != "&&":
                    command.append(word)
                    continue
                if command and command[0] == "rewardlab":
                    found.append(command[1:])
                command = []
    return found


@pytest.fixture
def capped_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every learner's ``learn`` trains for at most STEP_CAP steps (SB3's on-policy
    algorithms for one rollout, with one epoch over it)."""
    import stable_baselines3 as sb3
    from stable_baselines3.common.base_class import BaseAlgorithm

    from rewardlab.agents.hra import HRA
    from rewardlab.agents.ppo import PPO

    for cls in (sb3.PPO, sb3.A2C, sb3.DQN, sb3.SAC, PPO, HRA):
        original = cls.learn

        def learn(self: Any, total_timesteps: int, *args: Any, _original: Any = original, **kwargs: Any):
            if isinstance(self, BaseAlgorithm) and hasattr(self, "n_epochs"):
                self.n_epochs = 1
            return _original(self, min(total_timesteps, STEP_CAP), *args, **kwargs)

        monkeypatch.setattr(cls, "learn", learn)


def test_the_readme_has_examples() -> None:
    assert len(blocks("python")) >= 4 and len(commands()) >= 10


def promised_output(source: str) -> list[str]:
    """What the block's ``print(...)  # {...}`` or ``# [...]`` comments show, up to any ``...``."""
    shown = re.findall(r"^print\(.*\)\s+#\s*([\[{].*)$", source, re.M)
    return [text.split("...")[0] for text in shown]


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_example_runs_as_written(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capped_training: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = blocks("python")[index]
    if "mujoco" in source.lower() or "-v5" in source:
        pytest.importorskip("mujoco.batch")
    monkeypatch.chdir(tmp_path)
    if "best_reward.py" in source:  # the file a search writes, made here from a reference program
        from rewardlab import llm_reward
        from rewardlab.llm_reward.programs.loading import reward_file_text

        env_id = re.search(r'envs\.make\("([^"]+)"', source)[1]
        (tmp_path / "runs" / "search_cp").mkdir(parents=True)
        program = llm_reward.reference_programs(env_id)["human"].source
        (tmp_path / "runs" / "search_cp" / "best_reward.py").write_text(
            reward_file_text(program, env_id, ["from the README test"])
        )
    code = compile(source, f"README.md python block {index}", "exec")
    if "make_client(" not in source:
        exec(code, {"__name__": "__readme__"})
        printed = capsys.readouterr().out
        for shown in promised_output(source):  # a comment that shows what a print prints
            assert any(line.startswith(shown) for line in printed.splitlines()), (shown, printed)
        return
    with ScriptedChatServer(lambda messages: "push_right") as server:
        monkeypatch.setenv("REWARDLAB_BASE_URL", server.url)
        namespace: dict[str, Any] = {"__name__": "__readme__"}
        exec(code, namespace)
        stats = namespace["policy"].stats()
        assert stats["requests"] > 0 and stats["failures"] == stats["invalid_answers"] == 0, stats


@pytest.mark.parametrize("argv", commands(), ids=lambda argv: " ".join(argv)[:60])
def test_command_parses_as_written(argv: list[str]) -> None:
    arguments = build_parser().parse_args(argv)
    assert arguments.command == argv[0]
