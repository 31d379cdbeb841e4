"""The batched MuJoCo env: Gymnasium's v5 locomotion tasks, ``num_envs`` simulations at once.

:class:`MujocoEnv` loads the task's own model file from Gymnasium, steps every simulation
with ``frame_skip`` calls of ``mj_step`` on a :mod:`backend <envs.mujoco.backends>`, and
computes observations, reward terms and termination from the batched ``qpos``/``qvel`` as
torch tensors. A task subclass (:mod:`rewardlab.envs.mujoco.tasks`) only says how.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

from rewardlab.envs.core import Actions, BatchedEnv, StepReturn
from rewardlab.envs.mujoco.backends import Backend, make_backend

MUJOCO_EXTRA_HINT = "pip install 'rewardlab[mujoco]'"


def import_mujoco():
    """The ``mujoco`` module, or an error saying which extra installs it."""
    try:
        import mujoco
        from mujoco import batch  # noqa: F401  (mujoco >= 4.0)
    except ImportError as error:
        raise ImportError(
            f"the batched MuJoCo envs need mujoco>=4.0 (for mujoco.batch): {MUJOCO_EXTRA_HINT}"
        ) from error
    return mujoco


def model_path(xml_file: str) -> str:
    """The path of ``xml_file``: as given if it exists, else the file of that name in Gymnasium's assets.

    :raises ValueError: neither exists
    """
    if os.path.exists(xml_file):
        return os.path.abspath(xml_file)
    assets = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
    path = os.path.join(assets, xml_file)
    if not os.path.exists(path):
        raise ValueError(
            f"xml_file={xml_file!r} is neither a file nor one of Gymnasium's MuJoCo assets "
            f"({', '.join(sorted(f for f in os.listdir(assets) if f.endswith('.xml')))})"
        )
    return path


def load_model(path: str):
    """Compile the model file at ``path``; MuJoCo's compiler warnings become Python warnings.

    MuJoCo prints compiler warnings and appends them to ``MUJOCO_LOG.TXT`` in the working
    directory. Gymnasium's ``half_cheetah.xml`` uses the deprecated ``settotalmass``
    attribute, which MuJoCo 4 still honours: that warning concerns Gymnasium's file, not the
    user, and is dropped.
    """
    mujoco = import_mujoco()
    messages: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(messages.append)
    try:
        model = mujoco.MjModel.from_xml_path(path)
    finally:
        mujoco.set_mju_user_warning(previous)
    for message in messages:
        if "settotalmass" not in message:
            warnings.warn(f"MuJoCo compiling {os.path.basename(path)}: {message}", stacklevel=3)
    return model


class MujocoEnv(BatchedEnv):
    """``num_envs`` simulations of one Gymnasium v5 MuJoCo task, as torch tensors on ``device``.

    Same model file, frame skip, observations, reward terms, health rule, termination and
    reset noise as Gymnasium's env, and the same keyword arguments for them. Each step's
    ``info["reward_components"]`` holds the reward terms under Gymnasium's names
    (``forward_reward``, ``ctrl_cost``, ``healthy_reward``, ``contact_cost``), each as it
    enters the reward (costs negative), plus ``"extrinsic"``, their sum; ``info`` also has
    Gymnasium's step info (``x_position``, ``x_velocity``, ...).

    A subclass sets ``gymnasium_id``, ``xml_file``, ``frame_skip``, ``reset_noise_scale`` and
    ``qvel_noise`` and implements :meth:`observe`, :meth:`position_before` and :meth:`evaluate`;
    a task with per-episode state restarts it in :meth:`on_reset`.

    :param num_envs: how many simulations
    :param device: where observations and rewards live (``"cpu"``, ``"cuda[:i]"``)
    :param seed: seed of the reset noise; ``None`` seeds from the OS
    :param max_episode_steps: the time limit; ``None`` takes Gymnasium's (1000)
    :param compile: not supported (the physics runs in MuJoCo's C code or Warp kernels)
    :param validate_actions: raise on actions that are NaN or infinite
    :param backend: ``"cpu"`` (``mujoco.batch``), ``"warp"`` (MuJoCo Warp, a CUDA device) or
        ``"auto"``: Warp on a CUDA device when ``mujoco-warp`` is installed, else CPU
    :param nthread: threads of the CPU backend, 0 for every CPU
    :param xml_file: another model file, as Gymnasium's ``xml_file`` argument
    :param frame_skip: ``mj_step`` calls per env step; ``None`` keeps the task's
    :param reset_noise_scale: the scale of the reset noise; ``None`` keeps the task's
    """

    gymnasium_id: str
    xml_file: str
    frame_skip: int
    reset_noise_scale: float
    #: how qvel is perturbed at reset: "uniform" in [-scale, scale] or "normal" with std scale
    qvel_noise: str = "uniform"
    needs_cfrc_ext: bool = False
    metadata: dict[str, Any] = {**BatchedEnv.metadata, "render_modes": ["rgb_array"]}

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        max_episode_steps: int | None = None,
        compile: bool = False,
        validate_actions: bool = True,
        backend: str = "auto",
        nthread: int = 0,
        xml_file: str | None = None,
        frame_skip: int | None = None,
        reset_noise_scale: float | None = None,
    ):
        if compile:
            raise ValueError(
                f"compile=True does not apply to {self.gymnasium_id}: its physics runs in "
                "MuJoCo (C threads or Warp kernels), not in torch; leave compile=False"
            )
        if xml_file is not None:
            self.xml_file = xml_file
        self.model = load_model(model_path(self.xml_file))
        if frame_skip is not None:
            if not isinstance(frame_skip, int | np.integer) or frame_skip < 1:
                raise ValueError(f"frame_skip must be a positive int, got {frame_skip!r}")
            self.frame_skip = int(frame_skip)
        if reset_noise_scale is not None:
            if not np.isfinite(reset_noise_scale) or reset_noise_scale < 0:
                raise ValueError(
                    f"reset_noise_scale must be a finite number >= 0, got {reset_noise_scale!r}"
                )
            self.reset_noise_scale = float(reset_noise_scale)
        if not isinstance(nthread, int | np.integer) or nthread < 0:
            raise ValueError(f"nthread must be an int >= 0 (0: every CPU), got {nthread!r}")
        self.dt = float(self.model.opt.timestep) * self.frame_skip
        low, high = self.model.actuator_ctrlrange.astype(np.float32).T
        action_space = spaces.Box(low=low, high=high, dtype=np.float32)
        observation_space = spaces.Box(
            -np.inf, np.inf, shape=(self.observation_size(),), dtype=np.float32
        )
        super().__init__(
            num_envs,
            observation_space,
            action_space,
            device=device,
            seed=seed,
            max_episode_steps=max_episode_steps,
            compile=False,
            validate_actions=validate_actions,
        )
        self.backend: Backend = make_backend(
            backend,
            self.model,
            self.num_envs,
            self.device,
            nthread=int(nthread),
            need_cfrc_ext=self.needs_cfrc_ext,
        )
        sim = self.backend.device
        self.init_qpos = torch.as_tensor(self.model.qpos0, dtype=torch.float64, device=sim)
        self.init_qvel = torch.zeros(self.model.nv, dtype=torch.float64, device=sim)
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.dt))}
        self._elapsed: torch.Tensor | None = None

    # ----------------------------------------------------------------- the task
    def observation_size(self) -> int:
        """The length of one observation (``self.model`` is loaded when this is called)."""
        raise NotImplementedError

    def observe(self) -> torch.Tensor:
        """The float64 observations ``(num_envs, obs_dim)`` of the current state, on the backend's device."""
        raise NotImplementedError

    def position_before(self) -> torch.Tensor:
        """What :meth:`evaluate` needs from before the step (a copy, e.g. the x position)."""
        raise NotImplementedError

    def evaluate(
        self, before: torch.Tensor, action: torch.Tensor
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, torch.Tensor]]:
        """The reward terms, termination and Gymnasium's step info of the state just reached.

        :param before: what :meth:`position_before` returned before the step
        :param action: the float64 actions ``(num_envs, nu)`` as given (not clipped)
        :return: ``(components, terminated, info)``: reward terms by name as they enter the
            reward, bool ``(num_envs,)``, and float64 info tensors by Gymnasium's names
        """
        raise NotImplementedError

    def on_reset(self, ids: torch.Tensor) -> None:
        """Called once simulations ``ids`` have started a new episode (at :meth:`reset` and at
        every autoreset); a task that keeps per-episode state (a hold counter, the distance
        turned) restarts it here. Does nothing by default.

        :param ids: the sorted int64 ids of the simulations, on the backend's device
        """

    # ------------------------------------------------------------- the contract
    @property
    def qpos(self) -> torch.Tensor:
        """The simulations' ``qpos`` ``(num_envs, nq)``, float64 (a live view: do not write)."""
        return self.backend.qpos

    @property
    def qvel(self) -> torch.Tensor:
        """The simulations' ``qvel`` ``(num_envs, nv)``, float64 (a live view: do not write)."""
        return self.backend.qvel

    @property
    def state(self) -> torch.Tensor:
        """``(num_envs, nq + nv)``: each row is Gymnasium's ``env.unwrapped.state_vector()``."""
        if self._elapsed is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        return torch.cat([self.qpos, self.qvel], dim=1)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every simulation, from the model's initial state plus reset noise.

        :param seed: reseed the env's generator first (``None`` continues its stream)
        :param options: ignored, as Gymnasium's MuJoCo envs ignore it
        :return: ``(obs, info)``, obs float32 ``(num_envs, obs_dim)``
        """
        if seed is not None:
            self.generator.manual_seed(seed)
        self._reset_envs(torch.arange(self.num_envs, device=self.backend.device))
        self._elapsed = torch.zeros(self.num_envs, dtype=torch.int32, device=self.device)
        return self._to_env(self.observe()), {}

    def set_state(self, qpos: Actions, qvel: Actions) -> torch.Tensor:
        """Put every simulation in the state ``(qpos, qvel)``, as Gymnasium's ``set_state`` does.

        The episodes go on from there (their step counts are kept).

        :param qpos: ``(num_envs, nq)``
        :param qvel: ``(num_envs, nv)``
        :return: the float32 observations of the new state
        :raises ValueError: wrong shapes or non-finite values
        """
        if self._elapsed is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        sim = self.backend.device
        qpos = torch.as_tensor(qpos, dtype=torch.float64).to(sim)
        qvel = torch.as_tensor(qvel, dtype=torch.float64).to(sim)
        for name, value, width in (("qpos", qpos, self.model.nq), ("qvel", qvel, self.model.nv)):
            if tuple(value.shape) != (self.num_envs, width):
                raise ValueError(
                    f"{name} has shape {tuple(value.shape)}; {self.spec_id} with "
                    f"num_envs={self.num_envs} takes ({self.num_envs}, {width})"
                )
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f"{name} holds NaN or infinite values")
        self.backend.reset(torch.arange(self.num_envs, device=sim), qpos, qvel)
        return self._to_env(self.observe())

    def step(self, actions: Actions) -> StepReturn:
        """Advance every simulation by ``frame_skip`` physics steps; ended episodes restart in the same call.

        :param actions: ``(num_envs, nu)`` floats, tensor or numpy array. Like Gymnasium, the
            actions are not clipped: MuJoCo clamps the controls to their range and the
            control cost is taken from the actions as given.
        :return: ``(obs, reward, terminated, truncated, info)`` as in ``docs/batched_envs.md``
        """
        actions = self._as_action_tensor(actions)
        if self._elapsed is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        if self.validate_actions and not bool(torch.isfinite(actions).all()):
            bad = int((~torch.isfinite(actions)).any(dim=1).nonzero()[0, 0])
            raise ValueError(
                f"the action of env {bad} is {actions[bad].tolist()}: {self.spec_id} takes finite "
                "actions; check the policy's outputs"
            )
        sim = self.backend.device
        action = actions.to(sim, torch.float64)
        before = self.position_before()
        self.backend.step(action, self.frame_skip)
        components, terminated, step_info = self.evaluate(before, action)
        final_obs = self._to_env(self.observe())
        reward = self._to_env(sum(components.values()))
        terminated = terminated.to(self.device)
        self._elapsed = self._elapsed + 1
        truncated = self._elapsed >= self.max_episode_steps
        done = terminated | truncated
        obs = final_obs
        if bool(done.any()):
            ids = done.nonzero()[:, 0]
            self._reset_envs(ids.to(sim))
            obs = final_obs.clone()
            obs[ids] = self._to_env(self.observe()[ids.to(sim)])
            self._elapsed = torch.where(done, 0, self._elapsed)
        info: dict[str, Any] = {name: self._to_env(value) for name, value in step_info.items()}
        info["final_obs"] = final_obs
        info["reward_components"] = {
            **{name: self._to_env(value) for name, value in components.items()},
            "extrinsic": reward,
        }
        self._last_actions = actions
        return obs, reward, terminated, truncated, info

    def write_gymnasium_state(self, gymnasium_env: gymnasium.Env, index: int) -> None:
        """Put simulation ``index``'s state into an unwrapped Gymnasium env of the same task.

        Runs Gymnasium's ``set_state`` (``qpos``, ``qvel``, then ``mj_forward``).

        :param gymnasium_env: e.g. ``gymnasium.make("Hopper-v5").unwrapped``, after reset
        :param index: which simulation
        """
        qpos, qvel = self.backend.state(index)
        gymnasium_env.set_state(qpos, qvel)

    def __repr__(self) -> str:
        backend = type(self.backend).__name__ if hasattr(self, "backend") else "?"
        return (
            f"{type(self).__name__}({self.spec_id}, num_envs={self.num_envs}, "
            f"device={self.device}, backend={backend})"
        )

    # ------------------------------------------------------------ the machinery
    def _reset_envs(self, ids: torch.Tensor) -> None:
        """Reset simulations ``ids`` to the initial state plus Gymnasium's reset noise."""
        count = len(ids)
        scale = self.reset_noise_scale
        qpos_noise = self._uniform((count, self.model.nq), scale)
        if self.qvel_noise == "normal":
            qvel_noise = scale * torch.randn(
                (count, self.model.nv), generator=self.generator, device=self.device,
                dtype=torch.float64,
            )
        else:
            qvel_noise = self._uniform((count, self.model.nv), scale)
        sim = self.backend.device
        qpos = self.init_qpos + qpos_noise.to(sim)
        qvel = self.init_qvel + qvel_noise.to(sim)
        self.backend.reset(ids, qpos, qvel)
        self.on_reset(ids)

    def _uniform(self, shape: tuple[int, int], scale: float) -> torch.Tensor:
        draw = torch.rand(shape, generator=self.generator, device=self.device, dtype=torch.float64)
        return (2.0 * draw - 1.0) * scale

    def _to_env(self, value: torch.Tensor) -> torch.Tensor:
        return value.to(self.device, torch.float32)
