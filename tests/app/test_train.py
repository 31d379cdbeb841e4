"""``rewardlab train`` and ``rewardlab compare`` on small real runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from rewardlab import envs
from rewardlab.app.cli import main
from rewardlab.app.compare import compare, iqm, load_runs, read_scalars

PPO_SMALL = '{"n_steps": 32, "n_epochs": 2}'


def scalars(run_dir: Path, tag: str) -> list[float]:
    from rewardlab.app.compare import read_scalars

    values: list[float] = []
    for events in sorted(run_dir.rglob("events.out.tfevents.*")):
        series = read_scalars(events.parent)
        if tag in series:
            values.extend(series[tag][1].tolist())
    return values


def train(tmp_path: Path, *flags: str) -> int:
    config = tmp_path / "hp.json"
    config.write_text(json.dumps({"hyperparameters": json.loads(PPO_SMALL)}))
    return main(["train", "--no-progress", "--config", str(config), *flags])


def test_train_writes_a_complete_run_directory(tmp_path):
    logdir = tmp_path / "runs"
    code = train(
        tmp_path, "--env", "CartPole-v1", "--algo", "ppo", "--steps", "1024", "--seeds", "0,1",
        "--shaping", "builtin", "--logdir", str(logdir), "--num-envs", "16",
    )  # fmt: skip
    assert code == 0
    for seed in (0, 1):
        run = logdir / f"seed_{seed}"
        config = json.loads((run / "config.json").read_text())
        assert config["seed"] == seed and config["shaping"] == "builtin"
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["status"] == "complete" and metrics["num_timesteps"] >= 1024
        assert np.isfinite(metrics["eval_return_mean"])
        assert (run / "model.pt").exists() and (run / "checkpoint.pt").exists()
        episode_sums = scalars(run, "episode/extrinsic")
        true_returns = scalars(run, "rollout/ep_rew_mean")
        assert true_returns and episode_sums
        # CartPole pays +1 per step, so the true return must be positive and must not
        # include the shaping term (logged on its own).
        assert scalars(run, "reward/shaping")
        assert scalars(run, "reward/extrinsic") == pytest.approx([1.0] * len(scalars(run, "reward/extrinsic")))


def test_logged_return_is_the_true_return_under_shaping(tmp_path):
    """With a large shaping term, ep_rew_mean still equals the mean true episode length."""
    logdir = tmp_path / "runs"
    assert train(
        tmp_path, "--env", "CartPole-v1", "--steps", "1024", "--seed", "3", "--shaping", "builtin",
        "--shaping-scale", "50", "--logdir", str(logdir), "--num-envs", "16",
    ) == 0  # fmt: skip
    run = logdir / "seed_3"
    returns = scalars(run, "rollout/ep_rew_mean")
    lengths = scalars(run, "rollout/ep_len_mean")
    assert returns == pytest.approx(lengths)
    assert max(abs(v) for v in scalars(run, "reward/shaping")) > 0


def test_sb3_training_logs_components_and_resumes(tmp_path):
    logdir = tmp_path / "runs"
    flags = [
        "--env", "CartPole-v1", "--algo", "sb3-ppo", "--seed", "0", "--shaping", "builtin",
        "--logdir", str(logdir), "--num-envs", "2", "--no-progress",
    ]  # fmt: skip
    config = tmp_path / "sb3.json"
    config.write_text(json.dumps({"hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1}}))
    assert main(["train", "--config", str(config), "--steps", "256", *flags]) == 0
    run = logdir / "seed_0"
    assert scalars(run, "reward/shaping") and scalars(run, "episode/extrinsic")
    first = json.loads((run / "metrics.json").read_text())["num_timesteps"]
    # The same run asked again without --resume is refused; a longer one is a different run.
    assert main(["train", "--config", str(config), "--steps", "256", *flags]) == 2
    config.write_text(json.dumps({"hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1}}))
    assert main(["train", "--config", str(config), "--steps", "512", *flags]) == 2
    # Resuming continues from the checkpoint: the step count goes on, not from zero.
    (run / "metrics.json").unlink()
    assert main(["train", "--config", str(config), "--steps", "256", "--resume", *flags]) == 0
    assert json.loads((run / "metrics.json").read_text())["num_timesteps"] == first


def test_recurrent_flag_trains_and_saves_a_recurrent_ppo(tmp_path, capsys):
    from rewardlab.agents import PPO

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--recurrent {gru,lstm}" in capsys.readouterr().out
    logdir = tmp_path / "runs"
    flags = ["--env", "CartPole-v1", "--seed", "0", "--logdir", str(logdir), "--num-envs", "8"]
    assert train(tmp_path, "--steps", "512", "--recurrent", "lstm", *flags) == 0
    run = logdir / "seed_0"
    assert json.loads((run / "config.json").read_text())["hyperparameters"]["recurrent"] == "lstm"
    model = PPO.load(run / "model.pt")
    assert model.config.recurrent == "lstm" and model.policy.state_size == 2 * 128
    with pytest.raises(SystemExit):
        main(["train", "--logdir", str(tmp_path / "x"), "--recurrent", "rnn", *flags[:2]])
    assert "invalid choice: 'rnn'" in capsys.readouterr().err


def test_own_ppo_resume_continues_the_step_count(tmp_path):
    logdir = tmp_path / "runs"
    flags = ["--env", "CartPole-v1", "--seed", "0", "--logdir", str(logdir), "--num-envs", "8"]
    assert train(tmp_path, "--steps", "512", *flags) == 0
    run = logdir / "seed_0"
    config = json.loads((run / "config.json").read_text())
    # Pretend the run was killed at its checkpoint with 1024 steps asked for.
    config["steps"] = 1024
    (run / "config.json").write_text(json.dumps(config))
    (run / "metrics.json").unlink()
    assert train(tmp_path, "--steps", "1024", "--resume", *flags) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["num_timesteps"] == 1024


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--env", "NoSuchEnv-v0"], "known"),
        (["--env", "CartPole-v1", "--algo", "sb3-xyz"], "sb3-ppo"),
        (["--env", "CartPole-v1", "--shaping", "magic"], "builtin"),
        (["--env", "CartPole-v1", "--intrinsic", "rnd,bogus"], "bogus"),
        (["--env", "CartPole-v1", "--intrinsic", "rnd", "--fusion", "avg"], "product"),
        (["--env", "CartPole-v1", "--algo", "sb3-ppo", "--compile"], "--algo ppo"),
        (["--env", "CartPole-v1", "--algo", "sb3-ppo", "--recurrent", "gru"], "--algo ppo"),
    ],
)
def test_unknown_names_list_the_valid_ones(tmp_path, capsys, flags, message):
    assert main(["train", "--logdir", str(tmp_path / "x"), *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("algo", ["ppo", "hra", "sb3-ppo", "sb3-dqn"])
@pytest.mark.parametrize("seeds, bad", [(["--seed", "-3"], -3), (["--seeds", "-1,-2"], -1),
                                        (["--seeds", "0,-2"], -2), (["--seed", str(2**32)], 2**32)])
def test_a_seed_out_of_range_is_one_line_before_any_run_directory(tmp_path, capsys, algo, seeds, bad):
    # Gymnasium refuses negative seeds and NumPy's global seeding ones past 2**32 - 1, each
    # with a traceback after config.json was written; our PPO took a negative one silently.
    assert main(["train", "--env", "CartPole-v1", "--algo", algo, *seeds, "--logdir", str(tmp_path / "x")]) == 2
    error = capsys.readouterr().err
    assert f"seed {bad} is out of range for --seed/--seeds" in error and "Traceback" not in error
    assert len(error.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_quickstart_names_its_seeds_flag(tmp_path, capsys):
    assert main(["quickstart", "--seeds", "-1,0", "--logdir", str(tmp_path / "q")]) == 2
    assert "seed -1 is out of range for --seeds:" in capsys.readouterr().err
    assert not (tmp_path / "q").exists()


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.json", None, "cannot read the config file {path}: No such file or directory"),
        ("missing.toml", None, "cannot read the config file {path}: No such file or directory"),
        ("broken.json", "{", "cannot read the config file {path}: Expecting property name"),
        ("broken.toml", "steps = ", "cannot read the config file {path}: Invalid value"),
        ("latin1.json", b'{"env": "caf\xe9"}', "cannot read the config file {path}: 'utf-8' codec"),
        ("list.json", "[1]", "the config file {path} holds a list, not an object of settings"),
        # a shared run folder's file nested past the parser's limit raised RecursionError
        ("deep.json", "[" * 100_000, "cannot read the config file {path}: it nests"),
        ("deep.toml", "a = " + "[" * 100_000, "cannot read the config file {path}: it nests"),
    ],
)
def test_a_config_file_that_cannot_be_read_is_one_line(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    assert main(["train", "--env", "CartPole-v1", "--config", str(path), "--logdir", str(tmp_path / "x")]) == 2
    error = capsys.readouterr().err
    assert message.format(path=path) in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("algo", ["ppo", "sb3-ppo"])
@pytest.mark.parametrize("key, value, given", [
    ("num_envs", 0, "--num-envs 0"), ("num_envs", -4, "--num-envs -4"),
    ("eval_episodes", 0, "eval_episodes=0"), ("checkpoint_every", 0, "checkpoint_every=0"),
])
def test_zero_is_refused_not_taken_for_the_default(tmp_path, capsys, algo, key, value, given):
    # 0 trained with the default (16 envs for ppo) while config.json recorded 0
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"env": "CartPole-v1", "algo": algo, key: value}))
    assert main(["train", "--config", str(config), "--logdir", str(tmp_path / "x")]) == 2
    assert f"{given} must be a positive integer; leave it out for the default" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main(["train", "--env", "CartPole-v1", "--num-envs", "0", "--logdir", str(tmp_path / "x")]) == 2
    assert "--num-envs 0 must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("algo, hyperparameters, unknown, learner", [
    ("sb3-a2c", {"batch_size": 64, "n_steps": 8}, "['batch_size']", "SB3 A2C"),  # PPO's, not A2C's
    ("sb3-dqn", {"seed": 3, "gae_lambda": 0.9}, "['gae_lambda', 'seed']", "SB3 DQN"),  # the seed is --seed
    ("ppo", {"buffer_size": 10}, "['buffer_size']", "PPO"),
    ("hra", {"n_epochs": 2}, "['n_epochs']", "HRA"),
])
def test_hyperparameters_the_learner_does_not_take_are_named(tmp_path, capsys, algo, hyperparameters, unknown, learner):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"env": "CartPole-v1", "algo": algo, "hyperparameters": hyperparameters}))
    assert main(["train", "--config", str(config), "--logdir", str(tmp_path / "x")]) == 2
    error = capsys.readouterr().err
    assert f"--algo {algo} ({learner}) does not take the hyperparameter(s) {unknown}" in error
    assert "It takes: " in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("env, algo, message", [
    ("Pendulum-v1", "sb3-dqn", "--algo sb3-dqn takes Discrete actions, and Pendulum-v1's action space is Box("),
    ("CartPole-v1", "sb3-sac", "--algo sb3-sac takes Box actions, and CartPole-v1's action space is Discrete(2); "
                               "use --algo sb3-ppo or sb3-a2c or sb3-dqn"),
])
def test_an_sb3_algorithm_that_cannot_take_the_envs_actions_is_one_line(tmp_path, capsys, env, algo, message):
    # SB3 asserted it with a traceback, after config.json was written
    assert main(["train", "--env", env, "--algo", algo, "--logdir", str(tmp_path / "x")]) == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("flags", "compiled"), [
    (["--steps", "2000000"], True),  # long enough to pay for its compile
    (["--steps", "100000"], False),  # a quick start starts at once
    (["--steps", "2000000", "--no-compile"], False),
    (["--steps", "1000", "--compile"], True),
    (["--steps", "5000000", "--algo", "sb3-ppo"], False),  # only our PPO compiles
    (["--steps", "2000000", "--recurrent", "gru"], False),  # a recurrent policy trains eagerly
    (["--steps", "1000", "--recurrent", "gru", "--compile"], True),  # unless told
])
def test_long_ppo_runs_compile_unless_told_not_to(capsys, flags, compiled):
    from rewardlab.app.cli import build_parser
    from rewardlab.app.train import resolve_config

    args = build_parser(["train"]).parse_args(["train", "--env", "CartPole-v1", "--logdir", "x", *flags])
    assert resolve_config(args)["compile"] is compiled
    said = capsys.readouterr().err
    assert ("compiling PPO for a run of" in said) == (compiled and "--compile" not in flags)


def test_compile_trains_the_compiled_update_and_env(tmp_path):
    from rewardlab.agents.fused import CompiledUpdate
    from rewardlab.app.train import DEFAULTS
    from rewardlab.app.trainers import OwnPPOTrainer

    logdir = tmp_path / "runs"
    flags = ["--env", "CartPole-v1", "--seed", "0", "--logdir", str(logdir), "--num-envs", "8", "--compile"]
    assert train(tmp_path, "--steps", "512", *flags) == 0
    config = json.loads((logdir / "seed_0" / "config.json").read_text())
    assert config["compile"] is True
    trainer = OwnPPOTrainer({**DEFAULTS, **config}, tmp_path / "again")
    assert trainer.model.config.compile and trainer.env.compile
    trainer.learn(256, resumed=False, bar=None)
    assert isinstance(trainer.model._compiled.calls["update"], CompiledUpdate)


def write_run(root: Path, name: str, seed: int, points: list[tuple[int, float]], config=None) -> None:
    run = root / name / f"seed_{seed}"
    run.mkdir(parents=True)
    if config is not None:
        (run / "config.json").write_text(json.dumps({**config, "seed": seed}))
    writer = SummaryWriter(str(run / "tb"))
    for step, value in points:
        writer.add_scalar("rollout/ep_rew_mean", value, step)
    writer.close()


def test_compare_on_a_hand_made_case(tmp_path):
    for seed, final in enumerate([10.0, 20.0, 30.0, 40.0]):
        write_run(tmp_path, "a", seed, [(0, 0.0), (100, final)], config={"algo": "x"})
    for seed in range(2):
        write_run(tmp_path, "b", seed, [(0, 5.0), (50, 5.0), (100, 5.0)], config={"algo": "y"})
    rows = compare([tmp_path / "a", tmp_path / "b"], "rollout/ep_rew_mean", tmp_path / "out", 15.0)
    a, b = rows
    assert a["group"] == "a" and a["seeds"] == 4
    assert a["final_mean"] == pytest.approx(25.0)
    assert a["iqm_final"] == pytest.approx(25.0)  # mean of the middle two: 20 and 30
    assert a["auc_mean"] == pytest.approx(12.5)  # linear from 0 to the final value
    assert a["iqm_ci_low"] >= 10.0 and a["iqm_ci_high"] <= 40.0
    # Seeds with finals 20, 30, 40 cross 15 at steps 75, 50 and 37.5: logged points only
    # count, so each reaches it at step 100.
    assert a["seeds_reaching"] == 3 and a["steps_to_threshold_median"] == 100
    assert b["final_mean"] == 5.0 and b["auc_mean"] == pytest.approx(5.0) and b["seeds_reaching"] == 0
    out = tmp_path / "out"
    assert (out / "summary.csv").read_text().startswith("group,seeds")
    assert "| a | 4 |" in (out / "summary.md").read_text()
    png = (out / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_compare_plots_one_curve_per_group(tmp_path):
    import matplotlib.image

    write_run(tmp_path, "a", 0, [(0, 0.0), (100, 1.0)])
    write_run(tmp_path, "b", 0, [(0, 1.0), (100, 0.0)])
    compare([tmp_path / "a", tmp_path / "b"], "rollout/ep_rew_mean", tmp_path / "out", None)
    image = matplotlib.image.imread(tmp_path / "out" / "curves.png")
    assert image.ndim == 3 and image.shape[0] > 100
    runs = load_runs([tmp_path / "a", tmp_path / "b"], "rollout/ep_rew_mean")
    assert sorted({run.group for run in runs}) == ["a", "b"]


def test_compare_names_what_is_missing(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no TensorBoard event files under"):
        compare([tmp_path / "empty"], "rollout/ep_rew_mean", tmp_path / "out", None)
    write_run(tmp_path, "a", 0, [(0, 0.0)])
    with pytest.raises(ValueError, match="'rollout/ep_rew_mean'"):
        compare([tmp_path / "a"], "train/loss", tmp_path / "out", None)


def test_iqm_matches_trimmed_mean():
    values = np.array([1.0, 2.0, 3.0, 4.0, 100.0, -50.0, 7.0, 8.0])
    middle = np.sort(values)[2:6]
    assert iqm(values) == pytest.approx(middle.mean())


def test_quickstart_trains_both_and_compares(tmp_path, capsys):
    logdir = tmp_path / "qs"
    assert main(["quickstart", "--algo", "ppo", "--steps", "4096", "--seeds", "0", "--logdir", str(logdir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "| plain | 1 |" in out and "| shaped | 1 |" in out
    assert "tensorboard --logdir" in out
    assert (logdir / "compare" / "curves.png").exists()
    assert json.loads((logdir / "shaped" / "seed_0" / "config.json").read_text())["shaping"] == "builtin"


def test_ppo_on_mujoco_trains_with_the_mujoco_preset(tmp_path):
    pytest.importorskip("mujoco.batch")
    from rewardlab.agents.ppo import MUJOCO_CONFIG

    config_file = tmp_path / "hp.json"
    config_file.write_text(json.dumps({"hyperparameters": {"n_steps": 16, "n_epochs": 1}}))
    logdir = tmp_path / "runs"
    code = main([
        "train", "--no-progress", "--config", str(config_file), "--env", "Hopper-v5",
        "--algo", "ppo", "--steps", "256", "--seed", "0", "--logdir", str(logdir),
    ])  # fmt: skip
    assert code == 0
    config = json.loads((logdir / "seed_0" / "config.json").read_text())
    # The preset fills in what the config file leaves out; the file's values win.
    assert config["hyperparameters"] == {**MUJOCO_CONFIG.to_dict(), "n_steps": 16, "n_epochs": 1}
    assert scalars(logdir / "seed_0", "reward/healthy_reward")


@pytest.mark.parametrize("algo", ["ppo", "hra", "sb3-ppo"])
def test_train_on_a_minigrid_id_and_a_users_module_env(tmp_path, monkeypatch, algo):
    """Any Gymnasium env: MiniGrid (imported to register its ids) and module:Env-v0 of the user's."""
    from user_envs import write_corridor

    pytest.importorskip("minigrid")
    monkeypatch.chdir(tmp_path)
    env_id = write_corridor(tmp_path, f"train_corridor_{algo.replace('-', '_')}")
    for env in (env_id, "MiniGrid-Empty-5x5-v0"):
        logdir = tmp_path / f"runs_{env.replace(':', '_')}"
        code = main(["train", "--env", env, "--algo", algo, "--steps", "512", "--num-envs", "4",
                     "--logdir", str(logdir), "--no-progress"])
        assert code == 0
        metrics = json.loads((logdir / "seed_0" / "metrics.json").read_text())
        assert metrics["status"] == "complete" and np.isfinite(metrics["eval_return_mean"])


def test_compare_finds_event_files_beside_folders_nested_past_the_recursion_limit(tmp_path):
    # a sandboxed run's folders are its worker's: a hostile one nested 1,500 of them (red team)
    from rewardlab.app.compare import event_dirs
    from rewardlab.llm_reward.sandbox.runner import remove_tree

    run = tmp_path / "final" / "seed_0"
    (run / "tb").mkdir(parents=True)
    (run / "tb" / "events.out.tfevents.1.host").write_bytes(b"")
    (run / "linked").symlink_to(tmp_path, target_is_directory=True)  # not followed: no loop
    folder = os.open(run, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=folder)
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
        os.close(folder)
        folder = below
    os.close(folder)
    assert event_dirs(tmp_path) == [run / "tb"]  # rglob raised RecursionError
    remove_tree(run)  # so that pytest can remove its temporary folders


@pytest.mark.parametrize("algo", ["ppo", "sb3-ppo"])
def test_count_trains_on_a_continuous_observation_in_the_unit_box(tmp_path, monkeypatch, algo):
    """A float Box(0, 1) of continuous values is hashed, not refused as inexact counts."""
    from user_envs import UNIT_BOX_SOURCE, write_env

    monkeypatch.chdir(tmp_path)
    env_id = write_env(tmp_path, f"unit_box_{algo.replace('-', '_')}", UNIT_BOX_SOURCE)
    logdir = tmp_path / "runs"
    code = train(tmp_path, "--env", env_id, "--algo", algo, "--intrinsic", "count", "--steps", "128",
                 "--num-envs", "2", "--logdir", str(logdir))  # fmt: skip
    assert code == 0
    assert scalars(logdir / "seed_0", "reward/intrinsic/count")


@pytest.mark.parametrize("algo", ["sb3-ppo", "sb3-dqn"])
def test_sb3_intrinsic_reads_channel_last_images_as_the_learner_sees_them(tmp_path, monkeypatch, algo):
    """SB3 transposes HWC images for its policy (the rollout buffer holds them CHW); the
    off-policy bonus sits below that, in the vec env, and reads them as the env makes them."""
    from user_envs import IMAGE_SOURCE, write_env

    monkeypatch.chdir(tmp_path)
    env_id = write_env(tmp_path, f"image_{algo.replace('-', '_')}", IMAGE_SOURCE)
    logdir = tmp_path / "runs"
    hyperparameters = {"sb3-ppo": PPO_SMALL, "sb3-dqn": '{"learning_starts": 16, "buffer_size": 256}'}[algo]
    config = tmp_path / "hp.json"
    config.write_text(json.dumps({"hyperparameters": json.loads(hyperparameters), "eval_episodes": 1}))
    code = main(["train", "--no-progress", "--config", str(config), "--env", env_id, "--algo", algo,
                 "--intrinsic", "rnd", "--steps", "256", "--num-envs", "2", "--logdir", str(logdir)])  # fmt: skip
    assert code == 0
    assert scalars(logdir / "seed_0", "reward/intrinsic/rnd")


@pytest.mark.parametrize("algo", ["ppo", "sb3-ppo"])
def test_env_kwargs_reach_the_env_and_a_failing_constructor_is_one_clean_line(tmp_path, monkeypatch, capsys, algo):
    from user_envs import SIZED_CORRIDOR_SOURCE, write_env

    monkeypatch.chdir(tmp_path)
    env_id = write_env(tmp_path, f"sized_corridor_{algo.replace('-', '_')}", SIZED_CORRIDOR_SOURCE)
    logdir = tmp_path / "runs"
    flags = ["--env", env_id, "--algo", algo, "--steps", "64", "--num-envs", "2", "--logdir", str(logdir)]
    assert train(tmp_path, *flags) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert f"env {env_id!r} could not be made" in error and "missing 1 required positional argument: 'length'" in error
    assert "--env-kwargs" in error and not logdir.exists()

    assert train(tmp_path, *flags, "--env-kwargs", '{"length": 2}') == 0
    config = json.loads((logdir / "seed_0" / "config.json").read_text())
    assert config["env_kwargs"] == {"length": 2}
    # a corridor of 2 cells: the greedy policy reaches the goal in 2 steps or never (30)
    assert json.loads((logdir / "seed_0" / "metrics.json").read_text())["eval_greedy_return_mean"] in (0.0, 1.0)
    # the config file's key, as a run's own config.json repeats it (the user names their module's env)
    again = tmp_path / "again"
    assert main(["train", "--no-progress", "--config", str(logdir / "seed_0" / "config.json"), "--env", env_id,
                 "--logdir", str(again)]) == 0
    assert json.loads((again / "seed_0" / "config.json").read_text())["env_kwargs"] == {"length": 2}


def test_env_kwargs_must_be_a_json_object(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--env", "CartPole-v1", "--env-kwargs", "[1]", "--logdir", str(tmp_path)])
    assert "--env-kwargs must be a JSON object" in capsys.readouterr().err
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"env": "CartPole-v1", "env_kwargs": 7}))
    assert main(["train", "--config", str(config), "--logdir", str(tmp_path / "runs")]) == 2
    assert "env_kwargs=7 must be a JSON object" in capsys.readouterr().err


def test_a_run_made_before_a_setting_existed_resumes_at_its_default(tmp_path):
    from rewardlab.app.rundirs import prepare_run_dir

    run_dir = tmp_path / "seed_0"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"env": "CartPole-v1", "seed": 0}))
    prepare_run_dir(run_dir, {"env": "CartPole-v1", "seed": 0, "env_kwargs": {}}, resume=True)
    with pytest.raises(ValueError, match=r"differs in \['env_kwargs'\]"):
        prepare_run_dir(run_dir, {"env": "CartPole-v1", "seed": 0, "env_kwargs": {"size": 3}}, resume=True)


def test_compare_finds_episode_extrinsic_in_sb3_and_own_ppo_runs(tmp_path):
    """episode/extrinsic is always logged, by SB3 runs without shaping too (DESIGN.md)."""
    config = tmp_path / "small.json"
    config.write_text(json.dumps({"hyperparameters": {"n_steps": 32, "batch_size": 64}, "eval_episodes": 1}))
    for algo in ("ppo", "sb3-ppo"):
        assert main(["train", "--env", "CartPole-v1", "--algo", algo, "--steps", "256", "--num-envs", "2",
                     "--config", str(config), "--logdir", str(tmp_path / algo), "--no-progress"]) == 0  # fmt: skip
    assert main(["compare", str(tmp_path / "ppo"), str(tmp_path / "sb3-ppo"), "--tag", "episode/extrinsic",
                 "--out", str(tmp_path / "compare")]) == 0  # fmt: skip
    assert (tmp_path / "compare" / "summary.md").exists()


POINT_MASS_POTENTIAL = '''
def closeness(obs):
    """Minus the distance to the goal; obs is (N, 6) in Gymnasium's sorted order goal, pos, vel.
    The same code serves numpy batches (SB3) and torch batches (our PPO)."""
    return -(((obs[:, 2:4] - obs[:, 0:2]) ** 2).sum(-1)) ** 0.5
'''


@pytest.mark.parametrize("algo", ["ppo", "sb3-ppo"])
def test_potential_shapes_a_users_env_from_the_command_line_and_the_config(tmp_path, monkeypatch, algo):
    from user_envs import write_point_mass

    monkeypatch.chdir(tmp_path)
    env_id = write_point_mass(tmp_path, f"potential_point_mass_{algo.replace('-', '_')}")
    (tmp_path / "pm_potential.py").write_text(POINT_MASS_POTENTIAL)
    common = ["--env", env_id, "--algo", algo, "--steps", "128", "--num-envs", "2", "--no-progress"]
    assert main(["train", *common, "--potential", "pm_potential:closeness", "--logdir", "flag"]) == 0
    (tmp_path / "config.json").write_text(json.dumps({"potential": "pm_potential:closeness"}))
    # a file's potential imports its module only when the command line names it too
    assert main(["train", *common, "--config", "config.json", "--logdir", "file"]) == 2
    assert main(["train", *common, "--config", "config.json", "--potential", "pm_potential:closeness",
                 "--logdir", "file"]) == 0
    for logdir in ("flag", "file"):
        assert json.loads((tmp_path / logdir / "seed_0" / "config.json").read_text())["potential"] == (
            "pm_potential:closeness")
        scalars = read_scalars(tmp_path / logdir / "seed_0" / "tb" / "run_1")
        assert "reward/shaping" in scalars and np.any(scalars["reward/shaping"][1] != 0)


def test_a_potential_that_fails_is_one_line_and_leaves_no_run_behind(tmp_path, monkeypatch, capsys):
    from user_envs import write_point_mass

    monkeypatch.chdir(tmp_path)
    env_id = write_point_mass(tmp_path, "failing_potential_point_mass")
    (tmp_path / "failing_potential.py").write_text(POINT_MASS_POTENTIAL + "\ndef broken(obs):\n    return obs[:, 9]\n")
    common = ["train", "--env", env_id, "--steps", "64", "--logdir", "runs", "--no-progress"]
    for flags, message in (
        (["--shaping", "builtin"], "rewardlab train --potential module:function"),
        (["--potential", "failing_potential:missing"], "module 'failing_potential' has no function 'missing'"),
        (["--potential", "no_such_module:phi"], "cannot import module 'no_such_module'"),
        (["--potential", "failing_potential:broken"], "could not take an observation batch"),
        (["--potential", "closeness"], "must be module:function"),
        (["--potential", "failing_potential:closeness", "--shaping", "builtin"], "pass one"),
    ):
        assert main([*common, *flags]) == 2, flags
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "runs").exists()
    # MiniGrid's built-in potential reads whole grids; the command feeds the agent's view
    pytest.importorskip("minigrid")
    assert main(["train", "--env", "MiniGrid-Empty-5x5-v0", "--shaping", "builtin", "--steps", "64",
                 "--logdir", "runs", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "reads fully observed grids" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()
    # a learner that refuses its settings once the run directory was made takes it away again
    assert main(["train", "--env", "CartPole-v1", "--algo", "hra", "--intrinsic", "rnd", "--steps", "64",
                 "--logdir", "runs", "--no-progress"]) == 2
    assert not (tmp_path / "runs" / "seed_0").exists()


def test_compare_labels_two_searches_apart_and_warns_of_different_envs(tmp_path, capsys):
    write_run(tmp_path / "search_a" / "final", "best", 0, [(0, 0.0), (100, 1.0)], config={"env": "CartPole-v1"})
    write_run(tmp_path / "search_b" / "final", "best", 0, [(0, 1.0), (100, 0.0)],
              config={"env": "MountainCar-v0", "algo": "llm"})
    runs = [str(tmp_path / name / "final" / "best") for name in ("search_a", "search_b")]
    assert main(["compare", *runs, "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "warning: these runs trained on different envs (CartPole-v1: search_a/final/best; " \
           "MountainCar-v0: search_b/final/best)" in captured.err
    assert "| search_a/final/best | 1 |" in captured.out and "| search_b/final/best | 1 |" in captured.out
    write_run(tmp_path, "same_env", 0, [(0, 0.0), (100, 1.0)], config={"env": "CartPole-v1", "algo": "y"})
    assert main(["compare", runs[0], str(tmp_path / "same_env"), "--out", str(tmp_path / "out2")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_compare_reads_shared_run_folders_as_data(tmp_path, capsys):
    # runs from elsewhere: a folder name and an env from config.json with terminal escapes, a
    # config.json that is a list or nested past the parser's limit (AttributeError,
    # RecursionError tracebacks)
    write_run(tmp_path, "\x1b]0;pwned\x07a", 0, [(0, 0.0), (100, 1.0)], config={"env": "CartPole-v1"})
    write_run(tmp_path, "b", 0, [(0, 1.0), (100, 0.0)], config={"env": "\x1b[2JMountainCar-v0"})
    for name, text in (("listed", "[1, 2]"), ("nested", "[" * 100_000 + "]" * 100_000)):
        write_run(tmp_path, name, 0, [(0, 1.0), (100, 2.0)])
        (tmp_path / name / "seed_0" / "config.json").write_text(text)
    runs = [str(path) for path in sorted(tmp_path.iterdir())]
    assert main(["compare", *runs, "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    assert "pwned" in captured.out and "MountainCar-v0" in captured.err and "| nested | 1 |" in captured.out
    assert not any(character in shown for character in "\x1b\x07\x9b"), repr(shown)


def test_the_plots_legend_counts_seeds_in_words(tmp_path, monkeypatch):
    from rewardlab.app import compare as compare_module

    write_run(tmp_path, "one", 0, [(0, 0.0), (100, 1.0)])
    for seed in range(2):
        write_run(tmp_path, "two", seed, [(0, 0.0), (100, 1.0)], config={"algo": "x"})
    labels: list[str] = []
    real_plot = compare_module.plot

    def spy(runs, *args, **kwargs):
        import matplotlib.axes

        original = matplotlib.axes.Axes.plot

        def record(self, *plot_args, **plot_kwargs):
            labels.append(plot_kwargs.get("label"))
            return original(self, *plot_args, **plot_kwargs)

        monkeypatch.setattr(matplotlib.axes.Axes, "plot", record)
        return real_plot(runs, *args, **kwargs)

    monkeypatch.setattr(compare_module, "plot", spy)
    compare([tmp_path / "one", tmp_path / "two"], "rollout/ep_rew_mean", tmp_path / "out", None)
    assert labels == ["one (1 seed)", "two (2 seeds)"]


def test_the_true_evaluation_return_is_in_tensorboard(tmp_path):
    assert main(["train", "--env", "CartPole-v1", "--steps", "64", "--num-envs", "2", "--logdir", str(tmp_path),
                 "--no-progress", "--config", str(write_small_ppo(tmp_path))]) == 0
    metrics = json.loads((tmp_path / "seed_0" / "metrics.json").read_text())
    series = read_scalars(tmp_path / "seed_0" / "tb" / "eval_1")
    assert series["eval/mean_return"][1].tolist() == pytest.approx([metrics["eval_return_mean"]])
    assert series["eval/mean_return"][0].tolist() == [metrics["num_timesteps"]]


def write_small_ppo(folder: Path) -> Path:
    path = folder / "small.json"
    path.write_text(json.dumps({"hyperparameters": {"n_steps": 32, "n_epochs": 1}}))
    return path


def test_steps_are_whole_rollouts_and_the_command_says_so(tmp_path, capsys):
    assert main(["train", "--env", "CartPole-v1", "--steps", "100", "--num-envs", "2", "--logdir", str(tmp_path),
                 "--no-progress", "--config", str(write_small_ppo(tmp_path))]) == 0
    assert "ppo trains whole rollouts of 64 env steps: 128 steps for --steps 100" in capsys.readouterr().out
    assert json.loads((tmp_path / "seed_0" / "metrics.json").read_text())["num_timesteps"] == 128


UPRIGHT_PROGRAM = "def compute_reward(next_theta):\n    return 1 - next_theta ** 2, {}\n"


def test_ctrl_c_in_a_sandboxed_program_run_says_no_checkpoint_exists_and_resume_is_refused(
    tmp_path, monkeypatch, capsys
):
    from rewardlab.app.trainers import SandboxedProgramTrainer

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(SandboxedProgramTrainer, "_evaluate", interrupted)
    (tmp_path / "reward.py").write_text(UPRIGHT_PROGRAM)
    command = ["train", "--env", "CartPole-v1", "--reward-program", str(tmp_path / "reward.py"), "--steps", "64",
               "--logdir", str(tmp_path / "runs"), "--no-progress"]
    assert main(command) == 130
    out = capsys.readouterr().out
    assert "no checkpoint" in out and "--resume" not in out
    assert json.loads((tmp_path / "runs" / "seed_0" / "metrics.json").read_text())["status"] == "interrupted"
    assert main([*command, "--resume"]) == 2
    assert "cannot continue from a checkpoint" in capsys.readouterr().err


def test_ctrl_c_in_a_sandboxed_program_run_keeps_the_latest_streamed_policy(tmp_path, monkeypatch, capsys):
    from rewardlab.agents import PPO
    from rewardlab.app.trainers import SandboxedProgramTrainer

    evaluate, steps = SandboxedProgramTrainer._evaluate, []

    def stopped_after_the_first_checkpoint(self, *args):
        *head, streamed = args

        def then_ctrl_c(seed, step, snapshot):
            streamed(seed, step, snapshot)
            steps.append(step)
            raise KeyboardInterrupt  # as a Ctrl-C landing while the sandbox trains

        return evaluate(self, *head, then_ctrl_c)

    monkeypatch.setattr(SandboxedProgramTrainer, "_evaluate", stopped_after_the_first_checkpoint)
    (tmp_path / "reward.py").write_text(UPRIGHT_PROGRAM)
    run_dir = tmp_path / "runs" / "seed_0"
    assert main(["train", "--env", "CartPole-v1", "--reward-program", str(tmp_path / "reward.py"), "--steps", "1024",
                 "--num-envs", "4", "--logdir", str(tmp_path / "runs"), "--no-progress",
                 "--config", str(write_small_ppo(tmp_path))]) == 130
    assert "the latest checkpoint's policy (model.pt)" in capsys.readouterr().out
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "interrupted" and metrics["num_timesteps"] == steps[0] < 1024
    model = PPO.load(run_dir / "model.pt", envs.make("CartPole-v1", num_envs=4, seed=0))
    assert model.predict(np.zeros((4, 4), dtype=np.float32))[0].shape == (4,)


def test_the_sandboxed_runs_progress_bar_follows_the_workers_log(tmp_path):
    import threading

    from rewardlab.app.trainers import SandboxedProgramTrainer

    class Bar:
        total = 1000
        updates: list = []

        def update(self, steps, episode_return):
            self.updates.append((steps, episode_return))

    write_run(tmp_path / "sandbox", "tensorboard", 0, [(256, -3.0), (512, -1.5)])
    trainer = SandboxedProgramTrainer.__new__(SandboxedProgramTrainer)
    trainer.run_dir, trainer.poll_s = tmp_path, 0.01
    bar, done = Bar(), threading.Event()
    follower = threading.Thread(target=trainer._follow, args=(bar, done))
    follower.start()
    for _ in range(500):
        if bar.updates:
            break
        done.wait(0.01)
    done.set()
    follower.join()
    assert bar.updates and bar.updates[-1] == (512, -1.5)


@pytest.mark.parametrize("algo, hyperparameters, gamma", [
    ("ppo", {}, 0.99),  # PPOConfig's default
    ("ppo", {"gamma": 0.9}, 0.9),
    ("ppo", {"gamma": 0.9, "value_heads": {"extrinsic": {}, "shaping": {"gamma": 0.8}}}, 0.8),
    ("hra", {"gamma": 0.7}, 0.7),
    ("sb3-a2c", {"gamma": 0.6}, 0.6),
    ("sb3-ppo", {}, 0.99),  # SB3's PPO's default
])  # fmt: skip
def test_shaping_takes_the_discount_of_the_learners_config(tmp_path, algo, hyperparameters, gamma):
    # potential-based shaping telescopes only at the learner's own discount
    from rewardlab.app.train import DEFAULTS, make_trainer

    config = {**DEFAULTS, "env": "CartPole-v1", "algo": algo, "shaping": "builtin", "seed": 0,
              "hyperparameters": hyperparameters, "num_envs": 2}
    config.pop("seeds")
    trainer = make_trainer(config, tmp_path)
    if algo.startswith("sb3"):
        shaping = trainer.venv
        while type(shaping).__name__ != "VecPotentialShaping":
            shaping = shaping.venv
        assert trainer.model.gamma == gamma
    else:
        shaping = trainer.env
        assert trainer.model.config.discount("shaping") == gamma
    assert shaping.tracker.gamma == gamma


def test_hyperparameters_flag_goes_over_the_config_files(tmp_path):
    from rewardlab.app.cli import build_parser
    from rewardlab.app.train import resolve_config

    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"hyperparameters": {"learning_rate": 0.001, "n_epochs": 4}}))
    args = build_parser(["train"]).parse_args([
        "train", "--env", "CartPole-v1", "--logdir", "x", "--config", str(config_file),
        "--hyperparameters", '{"learning_rate": 0.0003}'])
    assert resolve_config(args)["hyperparameters"] == {"learning_rate": 0.0003, "n_epochs": 4}


def resolved(*flags: str) -> dict:
    """The config ``rewardlab train`` resolves for ``flags``, without training."""
    from rewardlab.app.cli import build_parser
    from rewardlab.app.train import resolve_config

    return resolve_config(build_parser(["train"]).parse_args(["train", "--logdir", "unused", *flags]))


def test_minigrid_with_a_bonus_trains_with_the_benchmarks_preset(tmp_path, capsys):
    pytest.importorskip("minigrid")
    from rewardlab.app.presets import MINIGRID_BONUS, MINIGRID_BONUS_PPO, preset_for

    config = resolved("--env", "MiniGrid-KeyCorridorS4R3-v0", "--intrinsic", "episodic")
    assert config["num_envs"] == 512 and config["steps"] == 6_000_000
    assert config["intrinsic_coef"] == 0.5 and config["compile"] is True and config["eval_episodes"] == 512
    assert config["hyperparameters"] == MINIGRID_BONUS_PPO
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("preset")]
    assert len(lines) == 1 and lines[0].startswith("preset minigrid-bonus") and "num_envs=512" in lines[0]
    # ObstructedMaze takes the weight that solved it; a task the benchmark did not run keeps --steps'
    assert resolved("--env", "MiniGrid-ObstructedMaze-1Dlh-v0", "--intrinsic", "episodic")["intrinsic_coef"] == 0.1
    assert resolved("--env", "MiniGrid-DoorKey-8x8-v0", "--intrinsic", "count")["steps"] == 100_000
    assert "no step budget for MiniGrid-DoorKey-8x8-v0: it trains the default 100,000" in capsys.readouterr().err
    # a user's MiniGrid task is of the family too
    assert preset_for("my_tasks:MiniGrid-KeyRooms-v0", "ppo", ["episodic"]) is MINIGRID_BONUS
    assert preset_for("my_tasks:KeyRooms-v0", "ppo", ["episodic"]) is None
    # a recurrent policy keeps the preset's settings but trains eagerly unless told to compile
    recurrent = resolved("--env", "MiniGrid-KeyCorridorS4R3-v0", "--intrinsic", "episodic", "--recurrent", "gru")
    assert recurrent["num_envs"] == 512 and recurrent["compile"] is False
    assert resolved("--env", "MiniGrid-KeyCorridorS4R3-v0", "--intrinsic", "episodic", "--recurrent", "gru",
                    "--compile")["compile"] is True  # fmt: skip
    # without a bonus, or for another learner, no preset
    assert resolved("--env", "MiniGrid-KeyCorridorS4R3-v0")["num_envs"] is None
    assert resolved("--env", "MiniGrid-KeyCorridorS4R3-v0", "--algo", "hra")["hyperparameters"] == {}


def test_flags_the_config_file_and_hyperparameters_override_the_preset(tmp_path, capsys):
    pytest.importorskip("minigrid")
    config_file = tmp_path / "run.json"
    config_file.write_text(json.dumps({"num_envs": 64, "hyperparameters": {"n_steps": 128, "ent_coef": 0.0}}))
    config = resolved(
        "--env", "MiniGrid-KeyCorridorS4R3-v0", "--intrinsic", "episodic", "--config", str(config_file),
        "--steps", "4096", "--no-compile", "--intrinsic-coef", "1.0", "--hyperparameters", '{"ent_coef": 0.02}',
    )  # fmt: skip
    assert config["num_envs"] == 64 and config["steps"] == 4096 and config["compile"] is False
    assert config["intrinsic_coef"] == 1.0 and config["eval_episodes"] == 512
    assert config["hyperparameters"]["n_steps"] == 128 and config["hyperparameters"]["ent_coef"] == 0.02
    assert config["hyperparameters"]["batch_size"] == 8192
    line = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("preset"))
    assert "num_envs" not in line and "steps=" not in line.replace("n_steps", "") and "batch_size=8192" in line


def test_a_run_writes_the_preset_into_its_config(tmp_path):
    pytest.importorskip("minigrid")
    logdir = tmp_path / "runs"
    code = main([
        "train", "--no-progress", "--env", "MiniGrid-Empty-5x5-v0", "--intrinsic", "episodic", "--steps", "256",
        "--num-envs", "4", "--no-compile", "--hyperparameters", '{"n_steps": 16, "batch_size": 64}',
        "--logdir", str(logdir),
    ])  # fmt: skip
    assert code == 0
    config = json.loads((logdir / "seed_0" / "config.json").read_text())
    assert config["hyperparameters"]["normalize_reward"] is True and config["hyperparameters"]["n_steps"] == 16
    assert config["intrinsic_coef"] == 0.5 and config["eval_episodes"] == 512
    # the config.json repeats the run as it was
    assert resolved("--config", str(logdir / "seed_0" / "config.json"))["hyperparameters"] == config["hyperparameters"]


def test_a_fusion_given_as_a_bonus_is_told_how_to_ask_for_it(tmp_path, capsys):
    assert main(["train", "--logdir", str(tmp_path / "x"), "--env", "CartPole-v1", "--intrinsic", "noveld"]) == 2
    error = capsys.readouterr().err
    assert "noveld is a fusion of bonuses: --intrinsic rnd,episodic --fusion noveld" in error
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--fusion noveld" in capsys.readouterr().out


def test_minigrid_runs_log_the_success_rate_and_evaluate_sampled_and_greedy(tmp_path, capsys):
    pytest.importorskip("minigrid")
    code = main(["train", "--no-progress", "--env", "MiniGrid-Empty-5x5-v0", "--steps", "2048", "--num-envs", "16",
                 "--hyperparameters", '{"n_steps": 32}', "--logdir", str(tmp_path)])  # fmt: skip
    assert code == 0
    run = tmp_path / "seed_0"
    success, returns = scalars(run, "rollout/success_rate"), scalars(run, "rollout/ep_rew_mean")
    assert len(success) == len(returns) > 0
    # MiniGrid pays only for the goal: a success rate above 0 exactly where a return is
    assert [s > 0 for s in success] == [r > 0 for r in returns] and all(0 <= s <= 1 for s in success)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["eval_actions"] == "sampled" and 0 <= metrics["eval_success_rate"] <= 1
    assert (metrics["eval_greedy_success_rate"] > 0) == (metrics["eval_greedy_return_mean"] > 0)
    series = read_scalars(run / "tb" / "eval_1")
    assert series["eval/success_rate"][1].tolist() == pytest.approx([metrics["eval_success_rate"]])
    assert series["eval/greedy_mean_return"][1].tolist() == pytest.approx([metrics["eval_greedy_return_mean"]])
    out = capsys.readouterr().out
    assert (f"true eval return {metrics['eval_return_mean']:.2f} with sampled actions, "
            f"{metrics['eval_greedy_return_mean']:.2f} greedy; success {metrics['eval_success_rate']:.2f} sampled") in out


def test_an_env_without_a_success_rule_logs_no_success_rate(tmp_path, capsys):
    assert main(["train", "--env", "CartPole-v1", "--steps", "64", "--num-envs", "2", "--logdir", str(tmp_path),
                 "--no-progress", "--config", str(write_small_ppo(tmp_path))]) == 0
    assert not scalars(tmp_path / "seed_0", "rollout/success_rate")
    metrics = json.loads((tmp_path / "seed_0" / "metrics.json").read_text())
    assert metrics["eval_success_rate"] is None and "; success" not in capsys.readouterr().out


def test_the_config_check_makes_a_minigrid_env_of_one_layout(monkeypatch):
    # a pool of 4096 layouts costs minutes on MultiRoom-N12-S10; the check needs one env
    pytest.importorskip("minigrid")
    from rewardlab.app.train import DEFAULTS, check_env_is_made

    made = []
    real = envs.make

    def make(env_id, **kwargs):
        made.append(kwargs)
        return real(env_id, **kwargs)

    monkeypatch.setattr(envs, "make", make)
    check_env_is_made({**DEFAULTS, "env": "MiniGrid-DoorKey-5x5-v0", "algo": "ppo", "env_kwargs": {}})
    check_env_is_made({**DEFAULTS, "env": "MiniGrid-DoorKey-5x5-v0", "algo": "ppo", "env_kwargs": {"layouts": 3}})
    check_env_is_made({**DEFAULTS, "env": "CartPole-v1", "algo": "ppo", "env_kwargs": {}})
    assert made == [{"num_envs": 1, "layouts": 1}, {"num_envs": 1, "layouts": 3}, {"num_envs": 1}]
