"""Hybrid intrinsic rewards: several modules fused into one bonus (HIRE)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rewardlab.intrinsic.base import Batch, IntrinsicModule, RunningRMS

FUSIONS = ("sum", "product", "cycle", "max")


class DecaySchedule:
    """A coefficient that decays geometrically, ``beta * (1 - kappa) ** t``, as RLeXplore's.

    Example::

        >>> schedule = DecaySchedule(beta=0.5, kappa=0.01)
        >>> schedule(0), round(schedule(100), 4)
        (0.5, 0.183)

    :param beta: the coefficient at ``t = 0``
    :param kappa: the decay per step of ``t``, in ``[0, 1)``
    """

    def __init__(self, beta: float = 1.0, kappa: float = 0.0) -> None:
        if not 0.0 <= kappa < 1.0:
            raise ValueError(f"kappa must be in [0, 1), got {kappa!r}")
        self.beta = float(beta)
        self.kappa = float(kappa)

    def __call__(self, t: int) -> float:
        """The coefficient after ``t`` steps.

        :param t: how many steps (updates, for :class:`Hybrid`) have passed
        """
        return self.beta * (1.0 - self.kappa) ** t

    def get_extra_state(self) -> dict[str, int]:
        return {"updates": self.updates}

    def set_extra_state(self, state: dict[str, int]) -> None:
        self.updates = int(state["updates"])

    def __repr__(self) -> str:
        return f"DecaySchedule(beta={self.beta}, kappa={self.kappa})"


class Hybrid(IntrinsicModule):
    """Several intrinsic modules fused into one bonus, with the four strategies of HIRE
    (Yuan et al. 2025, "Hybrid Intrinsic Reward").

    Each module's bonus ``b_i`` is first brought to a common scale,
    ``b_hat_i = b_i / RMS_i`` with ``RMS_i`` the running root mean square of that module's
    bonuses (RLeXplore standardises with a running mean and deviation instead; dividing by
    the RMS keeps bonuses non-negative, which ``product`` and ``max`` need). With weights
    ``w_i`` and the coefficient ``c_t`` of ``schedule`` after ``t`` updates:

    - ``sum``: ``c_t * sum_i w_i b_hat_i``
    - ``product``: ``c_t * prod_i w_i b_hat_i``, large only where every module finds novelty
    - ``cycle``: ``c_t * w_k b_hat_k`` with ``k = t mod len(modules)``: the modules take
      turns, one per update (all of them keep counting and training, only the reward
      rotates)
    - ``max``: ``c_t * max_i w_i b_hat_i``

    Example::

        >>> import gymnasium as gym
        >>> import torch
        >>> from rewardlab.intrinsic import Count, Hybrid, RND, DecaySchedule
        >>> space = gym.spaces.Box(0.0, 1.0, (16,))
        >>> hybrid = Hybrid([RND(space, seed=0), Count(space)], fusion="max",
        ...                 schedule=DecaySchedule(beta=1.0, kappa=1e-3))
        >>> obs = torch.eye(16)[torch.randint(0, 16, (8,))]
        >>> hybrid.compute(obs, torch.zeros(8), obs).shape
        torch.Size([8])

    :param modules: the modules to fuse, with distinct names
    :param fusion: ``"sum"``, ``"product"``, ``"cycle"`` or ``"max"``
    :param weights: ``w_i``, one per module (default all 1)
    :param schedule: the coefficient ``c_t``, a function of the number of updates (e.g.
        :class:`DecaySchedule`); ``None`` keeps it 1
    :param name: the component name (``intrinsic/<name>``)
    """

    def __init__(
        self,
        modules: Sequence[IntrinsicModule],
        fusion: str = "sum",
        weights: Sequence[float] | None = None,
        schedule: DecaySchedule | None = None,
        name: str = "hybrid",
    ) -> None:
        modules = list(modules)
        if not modules or not all(isinstance(m, IntrinsicModule) for m in modules):
            raise ValueError(
                f"modules must be a non-empty list of IntrinsicModule, got {modules!r}"
            )
        names = [m.name for m in modules]
        if len(set(names)) != len(names):
            raise ValueError(
                f"the modules' names must differ, got {names}; pass name= to the modules"
            )
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
        weights = [1.0] * len(modules) if weights is None else [float(w) for w in weights]
        if len(weights) != len(modules):
            raise ValueError(
                f"weights has {len(weights)} entries for {len(modules)} modules: {weights}"
            )
        super().__init__(modules[0].observation_space, None, name)
        self.parts = nn.ModuleList(modules)
        self.scales = nn.ModuleList(RunningRMS() for _ in modules)
        self.fusion = fusion
        self.register_buffer("weights", torch.tensor(weights))
        self.schedule = schedule
        self.updates = 0
        self.last_parts: dict[str, torch.Tensor] = {}

    def set_num_envs(self, num_envs: int) -> None:
        """Set ``num_envs`` here and in every module; see :meth:`IntrinsicModule.set_num_envs`.

        :param num_envs: the number of envs
        """
        for module in self.parts:
            module.set_num_envs(num_envs)
        super().set_num_envs(num_envs)

    @property
    def coefficient(self) -> float:
        """``c_t``, the schedule's coefficient now."""
        return 1.0 if self.schedule is None else float(self.schedule(self.updates))

    @property
    def active(self) -> int:
        """The index of the module whose bonus ``cycle`` uses now."""
        return self.updates % len(self.parts)

    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        """Every module's bonus, normalised and fused; see :meth:`IntrinsicModule.compute`.

        The raw bonus of each module stays in :attr:`last_parts` (by name) for logging.

        :param obs: observations ``(N, *obs_shape)``
        :param actions: actions ``(N, ...)``
        :param next_obs: next observations ``(N, *obs_shape)``
        :param dones: ``(N,)`` episode ends, passed on to the modules
        """
        raw = [m.compute(obs, actions, next_obs, dones).to(self.device) for m in self.parts]
        self.last_parts = {m.name: bonus for m, bonus in zip(self.parts, raw, strict=True)}
        normalised = []
        for scale, bonus in zip(self.scales, raw, strict=True):
            scale.update(bonus)
            normalised.append(scale.scale(bonus))
        terms = torch.stack(normalised) * self.weights.unsqueeze(1)
        if self.fusion == "sum":
            fused = terms.sum(dim=0)
        elif self.fusion == "product":
            fused = terms.prod(dim=0)
        elif self.fusion == "cycle":
            fused = terms[self.active]
        else:
            fused = terms.max(dim=0).values
        return self.coefficient * fused

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        """Train every module and advance the schedule and the cycle by one update.

        :param obs: observations ``(N, *obs_shape)``
        :param actions: actions ``(N, ...)``
        :param next_obs: next observations ``(N, *obs_shape)``
        """
        for module in self.parts:
            module.update(obs, actions, next_obs)
        self.updates += 1

    def get_extra_state(self) -> dict[str, int]:
        return {"updates": self.updates}

    def set_extra_state(self, state: dict[str, int]) -> None:
        self.updates = int(state["updates"])

    def __repr__(self) -> str:
        names = ", ".join(m.name for m in self.parts)
        return f"Hybrid([{names}], fusion={self.fusion!r}, schedule={self.schedule})"
