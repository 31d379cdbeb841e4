"""The learners behind ``rewardlab train``: each builds its env stack and model from a run's config.

:class:`OwnPPOTrainer` and :class:`HRATrainer` train our agents on a batched env;
:class:`rewardlab.app.sb3_trainer.SB3Trainer` trains an SB3 algorithm. All save checkpoints into the run directory and evaluate on the true reward.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rewardlab.app.rundirs import save_atomically

# the SB3 algorithms whose intrinsic bonus enters after the rollout (see SB3Trainer)
ON_POLICY = ("sb3-ppo", "sb3-a2c")


class ProgressBar:
    """A tqdm bar over env steps showing steps/s and the latest mean episode return."""

    def __init__(self, total: int, initial: int, label: str):
        from tqdm.auto import tqdm

        self._bar = tqdm(total=total, initial=initial, desc=label, unit="step", unit_scale=True)
        self.total = total

    def update(self, num_timesteps: int, episode_return: float | None, success_rate: float | None = None) -> None:
        self._bar.update(max(num_timesteps - self._bar.n, 0))
        shown = {} if episode_return is None else {"ep_rew_mean": f"{episode_return:.1f}"}
        if success_rate is not None:
            shown["success_rate"] = f"{success_rate:.2f}"
        if shown:
            self._bar.set_postfix(shown, refresh=False)

    def close(self) -> None:
        self._bar.close()


BATCHED_NUM_ENVS = 16  # envs of our batched learners when --num-envs is left out


def checkpoint_interval(config: dict[str, Any]) -> int:
    every = config["checkpoint_every"]
    return max(config["steps"] // 10, 1) if every is None else every


def num_envs_for(config: dict[str, Any], default: int = BATCHED_NUM_ENVS) -> int:
    """``--num-envs``, or ``default`` when it was left out (``None``: the only default marker)."""
    return default if config["num_envs"] is None else config["num_envs"]


class Trainer:
    """What every learner behind ``rewardlab train`` shares: a model that saves itself.

    A subclass builds ``self.model`` and ``self.run_dir`` and names its files.
    """

    model_file: str
    checkpoint_file: str
    model: Any
    run_dir: Path
    #: whether an interrupted run leaves a checkpoint that ``--resume`` continues from
    keeps_checkpoints = True

    @property
    def num_timesteps(self) -> int:
        return self.model.num_timesteps

    @property
    def rollout_steps(self) -> int:
        """Env steps the learner trains in one piece (a PPO rollout over every env): a run
        trains a whole number of them."""
        return int(getattr(self.model, "n_steps", 1)) * int(self.model.env.num_envs)

    def save_checkpoint(self) -> None:
        save_atomically(self.model.save, self.run_dir / self.checkpoint_file)

    def save_final(self) -> None:
        save_atomically(self.model.save, self.run_dir / self.model_file)


def is_mujoco(env_id: str) -> bool:
    """Whether ``env_id`` is one of the batched MuJoCo tasks or behaviours."""
    from rewardlab.envs.mujoco import BEHAVIOURS, TASKS

    return env_id in TASKS or env_id in BEHAVIOURS


class OwnPPOTrainer(Trainer):
    """Trains rewardlab's PPO on a batched env, with shaping and intrinsic rewards."""

    model_file = "model.pt"
    checkpoint_file = "checkpoint.pt"

    def __init__(self, config: dict[str, Any], run_dir: Path):
        import torch

        from rewardlab import envs
        from rewardlab.agents.ppo import PPO, PPOConfig
        from rewardlab.shaping import BatchedPotentialShaping

        self.config, self.run_dir = config, run_dir
        one_thread_on_cpu(config["device"])
        torch.manual_seed(config["seed"])
        num_envs = num_envs_for(config)
        hyperparameters = dict(config["hyperparameters"])
        compile = bool(config.get("compile")) or bool(hyperparameters.pop("compile", False))
        compile_env = compile and not is_mujoco(config["env"])  # MuJoCo's physics is not torch's
        env = envs.make(
            config["env"], num_envs=num_envs, device=config["device"], seed=config["seed"],
            compile=compile_env, **config["env_kwargs"],
        )  # fmt: skip
        if config["reward_program"]:  # --trust-program: in this process (else SandboxedProgramTrainer)
            env = load_program(config).wrap(env, trusted=True)
        potential = potential_for(config)
        if potential is not None:  # at the discount the learner gives the shaping component
            gamma = PPOConfig.from_dict(hyperparameters).discount("shaping")
            env = BatchedPotentialShaping(env, potential, gamma=gamma, scale=config["shaping_scale"])
        self.intrinsic = make_intrinsic(config, env, num_envs)
        if self.intrinsic is not None:  # --intrinsic-coef weighs the bonus's value head
            hyperparameters.setdefault("intrinsic_coef", config["intrinsic_coef"])
        self.env = env
        self.model = PPO(
            env, seed=config["seed"], intrinsic=self.intrinsic,
            tensorboard_log=str(run_dir / "tb"), compile=compile, **hyperparameters,
        )  # fmt: skip

    def learn(self, steps: int, resumed: bool, bar: ProgressBar | None) -> None:
        import torch

        from rewardlab.agents.evaluation import success_rule_of

        every = checkpoint_interval(self.config)
        next_checkpoint = [self.model.num_timesteps + every]
        rule = success_rule_of(self.env)

        def callback(local: dict[str, Any]) -> None:
            model = local["self"]
            ep = [e["r"] for e in model.ep_info_buffer]
            success = None
            if rule is not None and ep:
                # the episodes rollout/ep_rew_mean averages (SB3's last 100), beside it in the log
                success = float(rule(torch.tensor(ep)).float().mean())
                if local.get("logger") is not None:
                    local["logger"].record({"rollout/success_rate": success}, model.num_timesteps)
            if bar is not None:
                bar.update(model.num_timesteps, float(np.mean(ep)) if ep else None, success)
            if model.num_timesteps >= next_checkpoint[0]:
                self.save_checkpoint()
                next_checkpoint[0] = model.num_timesteps + every

        self.model.learn(
            steps, callback=callback, tb_log_name="run", reset_num_timesteps=not resumed
        )

    def load_checkpoint(self) -> int:
        from rewardlab.agents.ppo import PPO

        path = self.run_dir / self.checkpoint_file
        if not path.exists():
            return 0
        self.model = PPO.load(path, env=self.env, intrinsic=self.intrinsic)
        self.model.tensorboard_log = str(self.run_dir / "tb")
        return self.model.num_timesteps

    def evaluate(self, episodes: int, seed: int, deterministic: bool) -> Any:
        """The true returns (and successes, where the env has a rule) of ``episodes`` fresh episodes.

        :param episodes: how many, one per env.
        :param seed: seeds the evaluation env.
        :param deterministic: greedy actions instead of sampled ones.
        """
        from rewardlab.agents.evaluation import evaluate_batched

        return evaluate_batched(
            self.model, self.config["env"], episodes, seed, self.config["device"], deterministic,
            env_kwargs=self.config["env_kwargs"],
        )  # fmt: skip


def one_thread_on_cpu(device: str) -> None:
    """Train on one torch thread on a CPU, as the SB3 trainer does: rewardlab's networks are
    too small for a second thread to pay, and where other jobs share the cores the threads'
    waits can cost many times the work (``benchmarks/ppo_speed.py`` times PPO on one thread
    for the same reason)."""
    import torch

    if torch.device(device).type == "cpu":
        torch.set_num_threads(1)


class HRATrainer(OwnPPOTrainer):
    """Trains rewardlab's HRA on a batched env, with one head per reward component (shaping
    adds its own head); the same run directory, checkpoints and evaluation as our PPO."""

    def __init__(self, config: dict[str, Any], run_dir: Path):
        import torch

        from rewardlab import envs
        from rewardlab.agents.hra import HRA, HRAConfig
        from rewardlab.shaping import BatchedPotentialShaping

        if config["intrinsic"]:
            raise ValueError("--algo hra takes no --intrinsic rewards; use --algo ppo for those")
        one_thread_on_cpu(config["device"])
        self.config, self.run_dir = config, run_dir
        torch.manual_seed(config["seed"])
        num_envs = num_envs_for(config)
        env = envs.make(
            config["env"], num_envs=num_envs, device=config["device"], seed=config["seed"], **config["env_kwargs"]
        )
        hyperparameters = dict(config["hyperparameters"])
        potential = potential_for(config)
        if potential is not None:
            env = BatchedPotentialShaping(
                env, potential, gamma=HRAConfig.from_dict(hyperparameters).discount("shaping"),
                scale=config["shaping_scale"],
            )
        self.env = env
        self.model = HRA(
            env, seed=config["seed"], tensorboard_log=str(run_dir / "tb"), **hyperparameters
        )

    def load_checkpoint(self) -> int:
        from rewardlab.agents.hra import HRA

        path = self.run_dir / self.checkpoint_file
        if not path.exists():
            return 0
        self.model = HRA.load(path, env=self.env)
        self.model.tensorboard_log = str(self.run_dir / "tb")
        return self.model.num_timesteps


def load_potential(spec: str) -> Any:
    """The potential a ``"module:function"`` spec names (``--potential``), imported as
    ``module:Env-v0`` env ids are (from the working directory too). A class is instantiated
    with no arguments (``rewardlab.shaping.potentials:MountainCarEnergy``).

    :param spec: ``"module:function"``.
    :raises ValueError: a malformed spec, a module that cannot be imported, a missing name or
        one that is not callable, naming it.
    """
    from rewardlab.envs.gymnasium_env import import_user_module

    module, _, name = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not module or not name.isidentifier():
        raise ValueError(
            f"--potential {spec!r} must be module:function, e.g. my_potentials:distance_to_goal, where "
            "function(obs_batch) returns one potential per row"
        )
    found = getattr(import_user_module(module, f"--potential {spec}"), name, None)
    if found is None or not callable(found):
        raise ValueError(f"--potential {spec}: module {module!r} has no function {name!r}")
    return found() if isinstance(found, type) else found


def potential_for(config: dict[str, Any]) -> Any:
    """The run's shaping potential: ``--potential``'s, the env's built-in one (``--shaping
    builtin``), or None.

    :raises ValueError: no potential can be had for what the config asks.
    """
    if config.get("potential"):
        return load_potential(config["potential"])
    if config["shaping"] == "builtin":
        from rewardlab.shaping import potentials

        try:
            potential = potentials.for_env(config["env"])
        except ValueError as error:
            raise ValueError(
                f"{error}: rewardlab train --potential module:function"
            ) from None
        if isinstance(potential, potentials.MiniGridGoalDistance):
            raise ValueError(
                f"--shaping builtin: {config['env']}'s built-in potential reads fully observed "
                "grids, and rewardlab train gives the policy the agent's 7 x 7 view: shape with "
                "--potential module:function over the view, or add a bonus (--intrinsic episodic)"
            )
        return potential
    return None


def load_program(config: dict[str, Any]) -> Any:
    """The run's ``--reward-program``, checked against its description: the ``--describe``
    file's, else the one the program file carries, else the env's own.

    :param config: the run's config (``reward_program``, ``env``, ``describe``).
    :raises ValueError: the program or the description file cannot be read or fails its checks.
    """
    from rewardlab.llm_reward import load_reward

    description = None
    if config.get("describe"):
        from rewardlab.envs.description_files import load_description

        description = load_description(config["describe"], config["env"])[1]
    return load_reward(config["reward_program"], config["env"], description=description)


def make_intrinsic(config: dict[str, Any], env: Any, num_envs: int) -> Any:
    """The configured intrinsic module (several fused), or None."""
    if not config["intrinsic"]:
        return None
    from rewardlab import intrinsic

    observation_space = getattr(env, "single_observation_space", None) or env.observation_space
    action_space = getattr(env, "single_action_space", None) or env.action_space
    return intrinsic.make(
        config["intrinsic"], observation_space, action_space, fusion=config["fusion"],
        num_envs=num_envs, seed=config["seed"], device=config["device"],
    )  # fmt: skip


class SandboxedProgramTrainer(Trainer):
    """Trains rewardlab's PPO on a reward program's reward inside the sandbox (the default of
    ``rewardlab train --reward-program``).

    The program runs only in an isolated worker, as a search candidate does
    (:func:`rewardlab.llm_reward.training.train_on_program`): TensorBoard logs go to ``sandbox/`` in the run
    directory; the worker ships the trained policy back as plain arrays and this process,
    which never loads the program, rebuilds it as ``model.pt`` and measures its true return.
    Each checkpoint's policy streams back as it is made, so a run stopped with Ctrl-C keeps the
    latest as ``model.pt``; the training cannot continue from it in the sandbox, so ``--resume``
    is refused. The progress bar follows the worker's TensorBoard log.
    """

    model_file = "model.pt"
    checkpoint_file = "model.pt"
    keeps_checkpoints = False
    #: seconds between two looks at the worker's TensorBoard log for the progress bar
    poll_s = 2.0

    def __init__(self, config: dict[str, Any], run_dir: Path):
        if config["shaping"] != "none" or config.get("potential") or config["intrinsic"]:
            raise ValueError(
                "--reward-program trains on the program's reward alone in the sandbox; drop "
                "--shaping/--potential/--intrinsic, or pass --trust-program to combine them in this process"
            )
        self.config, self.run_dir = config, run_dir
        self.reward = load_program(config)
        self.model: Any = None
        self.steps_done = 0
        #: the latest checkpoint that streamed back, ``(seed, snapshot)``, rebuilt only if kept
        self._latest: tuple[int, Any] | None = None

    @property
    def num_timesteps(self) -> int:
        return self.steps_done

    @property
    def rollout_steps(self) -> int:
        from rewardlab.agents.ppo import default_n_steps

        num_envs = num_envs_for(self.config)
        return int(self.config["hyperparameters"].get("n_steps") or default_n_steps(num_envs)) * num_envs

    def _follow(self, bar: ProgressBar, done: Any) -> None:
        """Move ``bar`` to the latest step of the worker's TensorBoard log until ``done`` is set."""
        from rewardlab.app.compare import event_dirs, read_scalars

        while not done.wait(self.poll_s):
            try:
                for folder in event_dirs(self.run_dir / "sandbox"):
                    steps, values = read_scalars(folder).get("rollout/ep_rew_mean", ((), ()))
                    if len(steps):
                        bar.update(min(int(steps[-1]), bar.total), float(values[-1]))
            except (OSError, ValueError):  # a log being written: the next look reads it
                continue

    def learn(self, steps: int, resumed: bool, bar: ProgressBar | None) -> None:
        import threading

        from rewardlab import envs
        from rewardlab.llm_reward.training.snapshots import load_snapshot

        config = self.config
        hyperparameters = dict(config["hyperparameters"])
        # --compile: PPO's compiled graphs, which the sandbox's fork server loads for the worker
        compile = bool(config.get("compile")) or bool(hyperparameters.pop("compile", False))
        num_envs = num_envs_for(config)

        def keep(seed: int, snapshot: Any) -> None:
            env = envs.make(config["env"], num_envs=num_envs, device=config["device"], seed=seed)
            self.model = load_snapshot(snapshot, env, hyperparameters, seed)

        def streamed(seed: int, step: int, snapshot: Any) -> None:
            self._latest, self.steps_done = (seed, snapshot), step

        self._keep = keep

        done = threading.Event()
        if bar is not None:
            threading.Thread(target=self._follow, args=(bar, done), daemon=True).start()
        try:
            result = self._evaluate(steps, num_envs, hyperparameters, compile, keep, streamed)
        finally:
            done.set()
        if not result.ok or self.model is None:
            failure = result.failure
            raise ValueError(  # the CLI says it without a traceback
                f"training on {config['reward_program']} failed in the sandbox "
                f"({failure.kind if failure else 'no policy'}): {failure.reason if failure else ''}"
            )
        self.steps_done = result.seeds[0].checkpoints[-1].step
        if bar is not None:
            bar.update(self.steps_done, result.fitness)

    def _evaluate(self, steps: int, num_envs: int, hyperparameters: dict[str, Any], compile: bool,
                  keep: Any, streamed: Any) -> Any:
        from rewardlab.llm_reward.training import Budget, train_on_program

        config = self.config
        budget = Budget(steps, num_envs, {**hyperparameters, "compile": compile})
        return train_on_program(
            self.reward.program, config["env"], budget, (config["seed"],),
            timeout_s=max(600.0, steps / 50.0), run_dir=self.run_dir / "sandbox", device=config["device"],
            num_checkpoints=max(1, min(10, steps // max(num_envs, 1))), eval_episodes=config["eval_episodes"],
            on_final_policy=keep, on_checkpoint=streamed, description=self.reward.description_data,
        )  # fmt: skip

    def save_checkpoint(self) -> None:
        if self.model is None and self._latest is not None:  # stopped mid-run: the latest that came
            try:
                self._keep(*self._latest)
            except ValueError as error:  # not a policy of this model (untrusted data): nothing kept
                print(f"the latest checkpoint could not be rebuilt ({error}); no model.pt kept")
        if self.model is not None:
            save_atomically(self.model.save, self.run_dir / self.model_file)

    def save_final(self) -> None:
        self.save_checkpoint()

    def load_checkpoint(self) -> int:
        import json

        metrics = self.run_dir / "metrics.json"
        if metrics.exists() and json.loads(metrics.read_text()).get("status") == "complete":
            raise ValueError(f"--resume: {self.run_dir} holds a complete run (model.pt, metrics.json): nothing to continue")
        raise ValueError(
            f"--resume: a sandboxed --reward-program run cannot continue from a checkpoint (its training "
            f"starts afresh in the sandbox), so {self.run_dir} cannot be continued; start it again with another --logdir"
        )

    def evaluate(self, episodes: int, seed: int, deterministic: bool) -> Any:
        from rewardlab.agents.evaluation import evaluate_batched

        return evaluate_batched(self.model, self.config["env"], episodes, seed, self.config["device"], deterministic)
