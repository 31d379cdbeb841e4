"""``rewardlab train``: one command to train with or without shaping and intrinsic rewards.

Each seed gets its own run directory under ``--logdir``::

    runs/NAME/seed_0/
        config.json      the full resolved config: `rewardlab train --config` repeats the run
                         (a module:Env-v0 env, a --potential or --trust-program it names counts
                         only when the command line names it too: a file imports no code)
        tb/              TensorBoard events (SB3's keys, plus reward/<c> and episode/<c>, and
                         rollout/success_rate for an env with a success rule (MiniGrid: a
                         positive return); in tb/eval_1 the final evaluation: eval/mean_return
                         and eval/success_rate with the policy's sampled actions, as it trained,
                         eval/greedy_mean_return and eval/greedy_success_rate with greedy ones)
        model.pt|.zip    the final model
        checkpoint.*     the latest periodic checkpoint (``--resume`` continues from it)
        metrics.json     status, steps, wall time and the final evaluation (eval_return_mean:
                         sampled actions; eval_greedy_return_mean: greedy; success rates)

Example::

    rewardlab train --env MountainCar-v0 --algo ppo --steps 200000 --seeds 0,1,2 \\
        --shaping builtin --logdir runs/mc_shaped
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rewardlab.app.arguments import int_list, json_object, plain_text
from rewardlab.app.presets import preset_for
from rewardlab.app.rundirs import prepare_run_dir, remove_run_dir, run_dir_for, write_json
from rewardlab.app.trainers import (
    HRATrainer,
    OwnPPOTrainer,
    ProgressBar,
    SandboxedProgramTrainer,
    load_program,
    potential_for,
)
from rewardlab.common.compile_budget import AUTO_COMPILE_STEPS, compiles
from rewardlab.common.seeds import check_seeds
from rewardlab.common.toml import tomllib

ALGOS = ("ppo", "hra", "sb3-ppo", "sb3-a2c", "sb3-dqn", "sb3-sac")
SHAPINGS = ("none", "builtin")
FUSIONS = ("sum", "product", "cycle", "max", "ngu", "noveld")  # rewardlab.intrinsic.FUSIONS
#: the bonuses a named method fuses, as its paper does (NGU and NovelD: a lifelong RND
#: novelty with a per-episode count), for the line that answers ``--intrinsic noveld``
FUSION_HINTS = {"ngu": "rnd,episodic", "noveld": "rnd,episodic"}

DEFAULTS: dict[str, Any] = {
    "env": None,
    "env_kwargs": {},
    "algo": "ppo",
    "steps": 100_000,
    "seeds": [0],
    "shaping": "none",
    "potential": None,
    "shaping_scale": 1.0,
    "intrinsic": [],
    "fusion": "sum",
    "intrinsic_coef": 1.0,
    "num_envs": None,
    "device": "cpu",
    "hyperparameters": {},
    "eval_episodes": 10,
    "checkpoint_every": None,
    "reward_program": None,
    "describe": None,
    "trust_program": False,
    "compile": None,  # None: compile the runs long enough to pay for it (AUTO_COMPILE_STEPS)
}


def resolve_config(args: argparse.Namespace) -> dict[str, Any]:
    """Defaults, then the preset for the env (:mod:`rewardlab.app.presets`), then the
    ``--config`` file, then the flags given on the command line."""
    given: dict[str, Any] = read_config_file(args.config) if args.config else {}
    if given:
        refuse_code_from_file(given, args, args.config)
    file_hyperparameters = given.get("hyperparameters", {})
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is not None:
            given[key] = value
    if getattr(args, "hyperparameters", None) is not None:  # the flag's settings over the file's
        given["hyperparameters"] = {**file_hyperparameters, **args.hyperparameters}
    if getattr(args, "recurrent", None) is not None:  # PPO's setting, the flag over any other
        given["hyperparameters"] = {**given.get("hyperparameters", {}), "recurrent": args.recurrent}
    if args.seed is not None:
        given["seeds"] = [args.seed]
    config = {key: given.get(key, default) for key, default in DEFAULTS.items()}
    preset = preset_for(config["env"], config["algo"], config["intrinsic"])
    if preset is not None:
        decided = preset.apply(config, given)
        if decided:
            print(f"preset {preset.name} ({preset.source}): {' '.join(decided)}; a flag, --config "
                  "or --hyperparameters overrides any of them", file=sys.stderr)
        if preset.steps and config["env"] not in preset.steps and "steps" not in given:
            example, budget = max(preset.steps.items(), key=lambda item: item[1])
            print(f"preset {preset.name} has no step budget for {config['env']}: it trains the "
                  f"default {config['steps']:,} steps, where the benchmarked tasks took millions "
                  f"({example}: {budget:,}); pass --steps", file=sys.stderr)
    settle_compile(config)
    check_config(config)
    return config


def refuse_code_from_file(settings: dict[str, Any], args: argparse.Namespace, path: str) -> None:
    """Refuse a config file's setting that would run code in this process unless the command
    line gives it too: a ``module:Env-v0`` env or a potential (importing their module) and
    ``trust_program`` (the reward program outside the sandbox). A config file may come from a
    shared or downloaded run folder; only the user's own words import or trust code.

    :param settings: the file's settings.
    :param args: the command line.
    :param path: the file, for the error.
    :raises ValueError: naming the setting and the flag that says it.
    """
    from rewardlab.envs.gymnasium_env import env_module

    env = settings.get("env")
    if isinstance(env, str) and env_module(env) is not None and args.env is None:
        raise ValueError(f"the config file {path} names the env {env!r}, which would import its module: a "
                         "file never makes rewardlab import code; if you trust that module, pass "
                         f"--env {env!r} yourself")
    potential = settings.get("potential")
    if potential is not None and args.potential is None:
        raise ValueError(f"the config file {path} names the potential {potential!r}, which would import its "
                         "module: a file never makes rewardlab import code; if you trust that module, pass "
                         f"--potential {potential!r} yourself")
    if settings.get("trust_program") not in (None, False) and args.trust_program is None:
        raise ValueError(f"the config file {path} sets trust_program, which runs its reward program in "
                         "this process, outside the sandbox: a file never trusts a program for you; pass "
                         "--trust-program yourself for a program you have read, or drop it from the file")


def settle_compile(config: dict[str, Any]) -> None:
    """Decide ``compile`` where neither ``--compile`` nor ``--no-compile`` did: rewardlab's PPO
    compiles for runs of at least :data:`AUTO_COMPILE_STEPS` steps, and says so. A rule of
    the arguments alone, so the same command trains the same way (and a seed gives the same
    numbers) on every run."""
    if config["compile"] is not None:
        return
    steps = config["steps"]
    config["compile"] = (config["algo"] == "ppo" and isinstance(steps, int) and compiles(steps)
                         and "compile" not in config["hyperparameters"]
                         # a recurrent update's graph unrolls n_steps: compiled when asked
                         and not config["hyperparameters"].get("recurrent"))
    if config["compile"]:
        print(f"compiling PPO for a run of {steps:,} steps (the first run of a setting compiles for "
              "tens of seconds, later ones load it from the cache); --no-compile trains eagerly",
              file=sys.stderr)


def read_config_file(path: str) -> dict[str, Any]:
    """Read a JSON or TOML config whose keys are ``DEFAULTS``' keys.

    :raises ValueError: naming the file, when it cannot be read or parsed or is not a table.
    """
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ValueError(f"cannot read the config file {path}: {reason}") from None
    try:
        if path.endswith(".toml"):
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as error:  # tomllib.TOMLDecodeError is one too
        raise ValueError(f"cannot read the config file {path}: {error}") from None
    except RecursionError:
        raise ValueError(f"cannot read the config file {path}: it nests tables or arrays too deeply "
                         "to be settings") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"the config file {path} holds a {type(data).__name__}, not an object of settings "
            '(e.g. {"env": "CartPole-v1", "steps": 100000})'
        )
    data.pop("seed", None)  # a run's own config.json names its seed; --seeds decides here
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"config file {path} has unknown keys {unknown}; known: {sorted(DEFAULTS)}")
    return data


def check_config(config: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the value and the valid choices for anything unknown."""
    from rewardlab import envs, intrinsic

    if not config["env"]:
        raise ValueError("no env given: pass --env ENV_ID (e.g. --env CartPole-v1)")
    if config["algo"] not in ALGOS:
        raise ValueError(f"unknown algorithm {config['algo']!r}; choose from {', '.join(ALGOS)}")
    envs.check_id(config["env"])  # a batched env, or any id Gymnasium can make
    if not isinstance(config["env_kwargs"], dict):
        raise ValueError(
            f"env_kwargs={config['env_kwargs']!r} must be a JSON object of the env's constructor "
            "arguments, e.g. --env-kwargs '{\"size\": 7}'"
        )
    if config["shaping"] not in SHAPINGS:
        raise ValueError(
            f"unknown shaping {config['shaping']!r}; choose from {', '.join(SHAPINGS)} "
            "(builtin: the env's potential from rewardlab.shaping.potentials)"
        )
    if config["potential"] is not None and config["shaping"] != "none":
        raise ValueError(
            f"--potential {config['potential']} and --shaping {config['shaping']} each choose the "
            "potential; pass one"
        )
    unknown = [name for name in config["intrinsic"] if name not in intrinsic.registered()]
    if unknown:
        fusions = [name for name in unknown if name in FUSIONS]
        hint = "".join(f"; {name} is a fusion of bonuses: --intrinsic {FUSION_HINTS.get(name, 'rnd,count')} "
                       f"--fusion {name}" for name in fusions)
        raise ValueError(
            f"unknown intrinsic reward(s) {unknown}; choose from {', '.join(intrinsic.registered())}{hint}"
        )
    if config["fusion"] not in FUSIONS:
        raise ValueError(f"unknown fusion {config['fusion']!r}; choose from {', '.join(FUSIONS)}")
    if not isinstance(config["steps"], int) or config["steps"] < 1:
        raise ValueError(f"steps={config['steps']!r} must be a positive integer")
    for name, flag in (("num_envs", "--num-envs"), ("eval_episodes", None), ("checkpoint_every", None)):
        value = config[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            given = f"{flag} {value!r}" if flag else f"{name}={value!r}"
            raise ValueError(f"{given} must be a positive integer; leave it out for the default")
    if not config["seeds"]:
        raise ValueError("no seeds given: pass --seed S or --seeds 0,1,2")
    check_seeds(config["seeds"], "--seed/--seeds")
    if config["reward_program"]:
        if config["algo"] != "ppo":
            raise ValueError("--reward-program trains rewardlab's PPO on the batched env: use --algo ppo")
        load_program(config)  # the checks, before any training
    if config["describe"] and not config["reward_program"]:
        raise ValueError("--describe names the variables of a --reward-program; pass one, or drop it")
    if config["trust_program"] and not config["reward_program"]:
        raise ValueError("--trust-program applies to a --reward-program; pass one, or drop it")
    if not isinstance(config["compile"], bool):
        raise ValueError(f"compile={config['compile']!r} must be true or false")
    recurrent = isinstance(config["hyperparameters"], dict) and config["hyperparameters"].get("recurrent")
    if recurrent and config["algo"] != "ppo":
        raise ValueError(f"--recurrent {recurrent} is rewardlab's PPO's (--algo ppo), not --algo "
                         f"{config['algo']}'s; drop it, or use --algo ppo")
    if config["compile"]:
        if config["algo"] != "ppo":
            raise ValueError(f"--compile compiles rewardlab's PPO (--algo ppo), not --algo {config['algo']}; drop it")
    if config["env_kwargs"] and config["reward_program"] and not config["trust_program"]:
        raise ValueError(
            "--env-kwargs does not reach the sandbox that trains a --reward-program yet; drop it, "
            "register an id that makes the env with these arguments (gymnasium.register(..., "
            "kwargs=...)), or pass --trust-program for a program you have read"
        )
    check_hyperparameters(config)
    check_env_is_made(config)


def check_hyperparameters(config: dict[str, Any]) -> None:
    """Name the hyperparameters the chosen learner does not take, before any run directory is
    made (an SB3 algorithm raised a TypeError traceback, e.g. sb3-a2c given PPO's batch_size).

    :raises ValueError: naming them, the learner and the ones it takes.
    """
    hyperparameters = config["hyperparameters"]
    if not isinstance(hyperparameters, dict):
        raise ValueError(
            f"hyperparameters={hyperparameters!r} must be an object of the learner's settings, "
            'e.g. {"learning_rate": 0.0003}'
        )
    algo = config["algo"]
    if algo.startswith("sb3-"):
        # imports SB3, which the run needs anyway
        from rewardlab.app.sb3_trainer import hyperparameter_names

        known, algorithm = hyperparameter_names(algo)
        learner = f"SB3 {algorithm.__name__}"
    else:
        from rewardlab.agents.hra import HRAConfig
        from rewardlab.agents.ppo import PPOConfig

        learner_config = PPOConfig if algo == "ppo" else HRAConfig
        known, learner = learner_config.names(), learner_config.learner
    unknown = sorted(set(hyperparameters) - set(known))
    if unknown:
        raise ValueError(
            f"--algo {algo} ({learner}) does not take the hyperparameter(s) {unknown}; drop them from "
            f"the config's hyperparameters. It takes: {', '.join(sorted(known))}"
        )


def check_env_is_made(config: dict[str, Any]) -> None:
    """Make one env as the run's learner will, so that an env whose constructor fails (a
    missing argument, a wrong one), or whose actions an SB3 algorithm cannot take, is told
    before any run directory is made.

    :raises ValueError: naming the env id, its arguments and the constructor's error.
    """
    potential = potential_for(config)
    if config["algo"].startswith("sb3-"):
        from rewardlab.agents.sb3 import make_sb3_env  # imports SB3, which the run needs anyway
        from rewardlab.app.sb3_trainer import check_action_space

        env = make_sb3_env(config["env"], n_envs=1, env_kwargs=config["env_kwargs"])
        obs = env.reset()
        env.close()
        check_action_space(config["algo"], config["env"], env.action_space)
    else:
        from rewardlab import envs
        from rewardlab.envs.minigrid import is_minigrid_id

        kwargs = dict(config["env_kwargs"])
        envs.check_id(config["env"])  # imports the id's module, which is_minigrid_id reads
        if is_minigrid_id(config["env"]):  # one layout: a pool costs minutes on MultiRoom-N12
            kwargs.setdefault("layouts", 1)
        env = envs.make(config["env"], num_envs=1, **kwargs)
        obs, _ = env.reset(seed=0)
        env.close()
    if potential is not None:
        from rewardlab.shaping.core import evaluate_potential

        evaluate_potential(potential, obs)  # a potential that cannot take the env's observations says so now




def make_trainer(run_config: dict[str, Any], run_dir: Path) -> Any:
    """The learner that trains one seed's run (``run_config`` names its seed)."""
    if run_config["algo"] == "ppo" and run_config["reward_program"] and not run_config["trust_program"]:
        return SandboxedProgramTrainer(run_config, run_dir)
    if run_config["algo"] == "ppo":
        return OwnPPOTrainer(run_config, run_dir)
    if run_config["algo"] == "hra":
        return HRATrainer(run_config, run_dir)
    from rewardlab.app.sb3_trainer import SB3Trainer  # imports SB3, which is slow

    return SB3Trainer(run_config, run_dir)


def train_seed(config: dict[str, Any], seed: int, run_dir: Path, resume: bool, progress: bool) -> dict:
    """Train one seed in ``run_dir``; returns the metrics written to ``metrics.json``."""
    run_config = {**config, "seed": seed}
    run_config.pop("seeds")
    made = prepare_run_dir(run_dir, run_config, resume)
    try:
        trainer = make_trainer(run_config, run_dir)
    except BaseException:
        if made:  # a run that never started leaves nothing behind to block the corrected command
            remove_run_dir(run_dir)
        raise
    try:
        done_before = trainer.load_checkpoint() if resume else 0
    except ValueError:
        if made:
            remove_run_dir(run_dir)
        raise
    remaining = config["steps"] - done_before
    # PPO trains whole rollouts: say how many steps that makes, and count to it
    rollout = trainer.rollout_steps
    total = done_before + -(-max(remaining, 0) // rollout) * rollout
    if total != config["steps"] and remaining > 0:
        print(f"seed {seed}: {config['algo']} trains whole rollouts of {rollout:,} env steps: "
              f"{total - done_before:,} steps for --steps {config['steps']:,}" +
              (f" (from step {done_before:,})" if done_before else ""))
    started = time.perf_counter()
    status = "complete"
    bar = ProgressBar(total, done_before, f"seed {seed}") if progress else None
    try:
        if remaining > 0:
            trainer.learn(remaining, resumed=done_before > 0, bar=bar)
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        if bar is not None:
            bar.close()
    trainer.save_checkpoint()
    trainer.save_final()
    metrics = {
        "status": status,
        "env": config["env"],
        "algo": config["algo"],
        "seed": seed,
        "num_timesteps": trainer.num_timesteps,
        "wall_time_s": time.perf_counter() - started,
    }
    if status == "complete":
        metrics |= evaluate(trainer, config["eval_episodes"], 10_000 + seed)
        from rewardlab.agents.logger import TensorBoardLogger

        # beside the training curves: TensorBoard and compare --tag eval/mean_return show it
        logger = TensorBoardLogger(run_dir / "tb", "eval")
        logger.record({tag: metrics[key] for tag, key in EVAL_SCALARS.items() if metrics[key] is not None},
                      trainer.num_timesteps)
        logger.close()
    write_json(run_dir / "metrics.json", metrics)
    if status == "interrupted":
        raise Interrupted(run_dir, trainer.keeps_checkpoints)
    return metrics


#: the final evaluation's TensorBoard tags and their metrics.json entries: the policy as
#: trained (sampled actions), then its greedy actions
EVAL_SCALARS = {
    "eval/mean_return": "eval_return_mean", "eval/std_return": "eval_return_std",
    "eval/success_rate": "eval_success_rate", "eval/greedy_mean_return": "eval_greedy_return_mean",
    "eval/greedy_std_return": "eval_greedy_return_std", "eval/greedy_success_rate": "eval_greedy_success_rate",
}


def evaluate(trainer: Any, episodes: int, seed: int) -> dict[str, Any]:
    """The final evaluation, in fresh episodes: the policy as it trained, sampling its actions,
    and its greedy actions (a greedy MiniGrid policy can get stuck turning where the sampled
    one succeeds), each with its success rate where the env has a success rule.

    :param trainer: the run's trainer.
    :param episodes: episodes per kind of action.
    :param seed: seeds the evaluation envs (the same start states for both).
    :return: metrics.json's ``eval_*`` entries; ``eval_return_mean`` is the sampled actions'.
    """
    metrics: dict[str, Any] = {"eval_episodes": episodes, "eval_actions": "sampled"}
    for prefix, deterministic in (("", False), ("greedy_", True)):
        played = trainer.evaluate(episodes, seed=seed, deterministic=deterministic)
        metrics[f"eval_{prefix}return_mean"] = played.mean_return
        metrics[f"eval_{prefix}return_std"] = float(np.std(played.returns))
        metrics[f"eval_{prefix}success_rate"] = played.success_rate
    return metrics


def verdict(metrics: dict[str, Any]) -> str:
    """The line a seed's run ends with: its true evaluation return (and success rate), the
    sampled actions' first and the greedy ones' beside them, each said which."""
    if "eval_return_mean" not in metrics:
        return "not evaluated"
    text = (f"true eval return {metrics['eval_return_mean']:.2f} with sampled actions, "
            f"{metrics['eval_greedy_return_mean']:.2f} greedy")
    if metrics.get("eval_success_rate") is not None:
        text += (f"; success {metrics['eval_success_rate']:.2f} sampled, "
                 f"{metrics['eval_greedy_success_rate']:.2f} greedy")
    return f"{text} ({metrics['eval_episodes']} episodes each)"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a seed's run; what it left behind is saved.

    :param run_dir: the seed's run directory.
    :param checkpoint: whether it holds a checkpoint that ``--resume`` continues from.
    """

    def __init__(self, run_dir: Path, checkpoint: bool):
        super().__init__(str(run_dir))
        self.run_dir, self.checkpoint = run_dir, checkpoint

    def message(self) -> str:
        """What the user is told."""
        if self.checkpoint:
            return (f"interrupted: what was logged and a checkpoint are in {self.run_dir}; "
                    "continue with the same command and --resume")
        if (self.run_dir / "model.pt").exists():
            return (f"interrupted: what was logged and the latest checkpoint's policy (model.pt) are in "
                    f"{self.run_dir}; a sandboxed --reward-program run cannot continue from it: to train "
                    "further, start it again with another --logdir")
        return (f"interrupted: what was logged is in {self.run_dir}, but no checkpoint: none had come back "
                "from the sandbox yet; start it again with another --logdir")


def run_train(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    logdir = Path(args.logdir)
    results = []
    for seed in config["seeds"]:
        run_dir = run_dir_for(logdir, seed)
        try:
            metrics = train_seed(config, seed, run_dir, args.resume, progress=not args.no_progress)
        except Interrupted as interrupted:
            print(f"\n{interrupted.message()}")
            return 130
        results.append(metrics)
        print(
            f"seed {seed}: {metrics['num_timesteps']} steps in {metrics['wall_time_s']:.1f} s, "
            f"{verdict(metrics)}"
        )
    print(f"runs in {logdir}; compare with: rewardlab compare {logdir} --out {logdir}/compare")
    print(f"TensorBoard: tensorboard --logdir {logdir}")
    return 0


def register_train(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        description=plain_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--env", help="env id, e.g. CartPole-v1")
    parser.add_argument("--env-kwargs", dest="env_kwargs", type=json_object("--env-kwargs", '{"size": 7}'),
                        help="the env's constructor arguments as a JSON object (gymnasium.make(env, **kwargs))")
    parser.add_argument("--algo", help=f"one of {', '.join(ALGOS)} (default ppo)")
    parser.add_argument("--hyperparameters", type=json_object("--hyperparameters", '{"learning_rate": 0.0003}'),
                        help="the learner's settings as a JSON object, over a --config file's, e.g. "
                             "'{\"image_shape\": [7, 7, 3]}' for --algo ppo's CNN on MiniGrid's view")
    parser.add_argument("--steps", type=int, help="env steps per seed (default 100000)")
    parser.add_argument("--seed", type=int, help="one seed")
    parser.add_argument("--seeds", type=int_list, help="several seeds, e.g. 0,1,2")
    parser.add_argument("--shaping", help="none or builtin (the env's built-in potential); see --potential")
    parser.add_argument("--potential", metavar="MODULE:FUNCTION",
                        help="shape with your own potential: function(obs_batch) -> one value per row, "
                             "imported from module (the working directory too), e.g. my_potentials:phi")
    parser.add_argument("--shaping-scale", dest="shaping_scale", type=float)
    parser.add_argument("--intrinsic", type=_name_list,
                        help="one bonus or several (e.g. episodic, or rnd,count; the error lists them all); "
                             "NovelD and NGU are fusions: --intrinsic rnd,episodic --fusion noveld")
    parser.add_argument("--fusion", help=f"how several intrinsic rewards fuse: {', '.join(FUSIONS)}")
    parser.add_argument("--intrinsic-coef", dest="intrinsic_coef", type=float)
    parser.add_argument("--num-envs", dest="num_envs", type=int)
    parser.add_argument("--recurrent", choices=["gru", "lstm"],
                        help="--algo ppo: a policy with memory, a GRU or LSTM core over the observation's "
                             "features (hyperparameter recurrent; its width recurrent_hidden_size, 128); "
                             "eager unless --compile")
    parser.add_argument("--device", help="cpu or cuda (our PPO)")
    parser.add_argument("--reward-program", dest="reward_program",
                        help="train on a reward program file (e.g. a search's best_reward.py; --algo ppo), "
                             "inside the sandbox")
    parser.add_argument("--describe", metavar="FILE",
                        help="the description file (TOML/JSON) a hand-written --reward-program's variables "
                             "come from; a search's best_reward.py carries its own")
    parser.add_argument("--trust-program", dest="trust_program", action="store_const", const=True,
                        help="run the --reward-program in this process, outside the sandbox (only for a "
                             "program you have read): allows --shaping, --intrinsic and --resume")
    parser.add_argument("--compile", action="store_const", const=True,
                        help="--algo ppo: compile PPO's rollout and update (the first run of a setting "
                             "compiles for tens of seconds, later runs load it from the cache); the default "
                             f"for runs of at least {AUTO_COMPILE_STEPS:,} steps")
    parser.add_argument("--no-compile", dest="compile", action="store_const", const=False,
                        help="--algo ppo: train eagerly, even a long run")
    parser.add_argument("--config", help="a JSON/TOML file with these settings (flags win)")
    parser.add_argument("--logdir", required=True, help="parent folder of the run directories")
    parser.add_argument("--resume", action="store_true", help="continue runs from their checkpoints")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_train)


def _name_list(text: str) -> list[str]:
    return [part.strip().lower() for part in text.split(",") if part.strip()]
