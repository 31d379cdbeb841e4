"""``rewardlab train`` on a shared run folder: its files are data.

A run folder shared by a colleague, or downloaded, holds a ``config.json`` that
``--config`` repeats; what in it would run code in this process (a ``module:Env-v0`` id or a
``--potential`` that imports its module, ``trust_program`` that runs the reward program
outside the sandbox) counts only when the command line says it too. Its checkpoints are
read with no code of their own run (``--resume``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewardlab.app.cli import main

# a module beside the shared config: importing it leaves a mark
EVIL = """
from pathlib import Path
Path(__file__).with_name("imported.mark").write_text("ran in the caller")
"""


@pytest.fixture
def shared_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A shared run folder, the working directory, holding a module of its own."""
    import rewardlab.envs.gymnasium_env as gymnasium_env

    folder = tmp_path / "shared_run"
    folder.mkdir()
    (folder / "shared_run_helper.py").write_text(EVIL)
    monkeypatch.chdir(folder)
    monkeypatch.setattr(gymnasium_env, "_working_folder", None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield folder
    sys.modules.pop("shared_run_helper", None)  # what a failing run imported


@pytest.mark.parametrize(("settings", "flag"), [
    ({"env": "shared_run_helper:Evil-v0"}, "--env 'shared_run_helper:Evil-v0'"),
    ({"env": "CartPole-v1", "potential": "shared_run_helper:phi"}, "--potential 'shared_run_helper:phi'"),
])
def test_a_config_files_module_is_not_imported_unless_the_command_line_names_it(
    shared_folder: Path, capsys: pytest.CaptureFixture[str], settings: dict, flag: str
) -> None:
    (shared_folder / "config.json").write_text(json.dumps({**settings, "steps": 64}))
    code = main(["train", "--config", "config.json", "--no-progress", "--logdir", "runs"])
    error = capsys.readouterr().err
    assert not (shared_folder / "imported.mark").exists(), "the config file's module ran in the caller"
    assert code == 2 and error.count("\n") == 1, error
    assert "config.json" in error and flag in error and "a file never makes rewardlab import code" in error


def test_a_config_file_does_not_trust_a_reward_program_for_the_user(
    shared_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rewardlab.llm_reward.programs.loading import reward_file_text

    program = "def compute_reward(next_theta):\n    return -abs(next_theta), {}\n"
    (shared_folder / "best_reward.py").write_text(reward_file_text(program, "CartPole-v1", ["shared"]))
    (shared_folder / "config.json").write_text(json.dumps(
        {"env": "CartPole-v1", "reward_program": "best_reward.py", "trust_program": True, "steps": 64}))
    code = main(["train", "--config", "config.json", "--no-progress", "--logdir", "runs"])
    error = capsys.readouterr().err
    assert code == 2 and "--trust-program" in error and "config.json" in error, error
    assert not (shared_folder / "runs").exists()


class _Planted:
    """What a planted pickle rebuilds: a call that leaves a mark."""

    def __init__(self, mark: Path):
        self.mark = mark

    def __reduce__(self) -> tuple:
        return Path.write_text, (self.mark, "ran in the caller")


def test_resuming_a_shared_sb3_run_unpickles_nothing_from_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SB3's checkpoint.zip holds cloudpickled objects (the spaces, schedules, the last
    # observations); a run folder from elsewhere ran what they rebuild on --resume
    import base64
    import pickle
    import zipfile

    monkeypatch.chdir(tmp_path)
    flags = ["train", "--env", "CartPole-v1", "--algo", "sb3-ppo", "--steps", "128", "--num-envs", "2",
             "--hyperparameters", '{"n_steps": 64, "batch_size": 64, "n_epochs": 1}', "--no-progress",
             "--logdir", "runs"]
    assert main(flags) == 0
    checkpoint = tmp_path / "runs" / "seed_0" / "checkpoint.zip"
    with zipfile.ZipFile(checkpoint) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(files["data"])
    planted = base64.b64encode(pickle.dumps(_Planted(tmp_path / "unpickled.mark"))).decode()
    for key in ("lr_schedule", "planted_key"):
        data[key] = {":type:": "<class 'function'>", ":serialized:": planted}
    files["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(checkpoint, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    (tmp_path / "runs" / "seed_0" / "metrics.json").unlink()
    assert main([*flags, "--resume"]) == 0
    assert not (tmp_path / "unpickled.mark").exists(), "the checkpoint's pickle ran in the caller"
