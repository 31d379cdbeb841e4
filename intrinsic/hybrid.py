"""Hybrid intrinsic rewards: several modules fused into one bonus (HIRE)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rewardlab.common.running_stats import RunningMeanStd
from rewardlab.intrinsic.base import Batch, IntrinsicModule, RunningRMS

FUSIONS = ("sum", "product", "cycle", "max", "ngu", "noveld")


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

    Lifelong x episodic (modules with ``episodic`` true forget at episode ends, the others
    are lifelong):

    - ``ngu``: NGU's product (Badia et al. 2020), ``c_t * prod_episodic w_i b_hat_i *
      prod_lifelong clip(1 + (b_j - mean_j) / std_j, 1, max_modulator)``, the lifelong
      bonuses standardised with their running mean and deviation, as NGU's modulator;
    - ``noveld``: NovelD (Zhang et al. 2021), ``c_t * w * max(n(s') - alpha * n(s), 0) *
      [n_ep(s') == 1]`` with ``n`` the one lifelong module's ``novelty`` (RND's error or
      ``1 / sqrt`` of a count) and ``n_ep`` the visits of :class:`~rewardlab.intrinsic.
      EpisodicCount` in the episode: a bonus only at the frontier of what is known, and
      once per state per episode. The result is divided by its running RMS.

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
    :param fusion: one of :data:`FUSIONS`
    :param weights: ``w_i``, one per module (default all 1)
    :param schedule: the coefficient ``c_t``, a function of the number of updates (e.g.
        :class:`DecaySchedule`); ``None`` keeps it 1
    :param alpha: NovelD's ``alpha``, the weight of the novelty of ``s``
    :param max_modulator: NGU's ``L``, the bound of a lifelong modulator
    :param name: the component name (``intrinsic/<name>``)
    """

    def __init__(
        self,
        modules: Sequence[IntrinsicModule],
        fusion: str = "sum",
        weights: Sequence[float] | None = None,
        schedule: DecaySchedule | None = None,
        alpha: float = 0.5,
        max_modulator: float = 5.0,
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
        if not alpha >= 0:
            raise ValueError(f"alpha must be a non-negative number, got {alpha!r}")
        if not max_modulator >= 1:
            raise ValueError(f"max_modulator must be at least 1, got {max_modulator!r}")
        _check_roles(modules, fusion)
        super().__init__(modules[0].observation_space, None, name)
        self.parts = nn.ModuleList(modules)
        self.scales = nn.ModuleList(RunningRMS() for _ in modules)
        # NGU standardises each lifelong bonus; NovelD scales its fused bonus
        self.modulator_stats = nn.ModuleList(RunningMeanStd(()) for _ in modules)
        self.fused_scale = RunningRMS()
        self.fusion = fusion
        self.alpha = float(alpha)
        self.max_modulator = float(max_modulator)
        self.episodic = all(m.episodic for m in modules)
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
        if self.fusion == "noveld":
            # the novelty of s and s' before this batch is counted or trained on
            lifelong = next(m for m in self.parts if not m.episodic)
            before = lifelong.novelty(obs).to(self.device)
            after = lifelong.novelty(next_obs).to(self.device)
        raw = [m.compute(obs, actions, next_obs, dones).to(self.device) for m in self.parts]
        self.last_parts = {m.name: bonus for m, bonus in zip(self.parts, raw, strict=True)}
        if self.fusion == "noveld":
            gate = next(m for m in self.parts if m.episodic).last_visits.to(self.device) == 1
            weight = self.weights[[not m.episodic for m in self.parts].index(True)]
            fused = torch.relu(after - self.alpha * before) * gate
            self.fused_scale.update(fused)
            return self.coefficient * weight * self.fused_scale.scale(fused)
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
        elif self.fusion == "max":
            fused = terms.max(dim=0).values
        else:  # ngu
            fused = torch.ones_like(terms[0])
            for i, module in enumerate(self.parts):
                if module.episodic:
                    fused = fused * terms[i]
                else:
                    stats = self.modulator_stats[i]
                    stats.update(raw[i])
                    standard = (raw[i] - stats.mean) / torch.sqrt(stats.var + 1e-8)
                    fused = fused * (1.0 + standard.float()).clamp(1.0, self.max_modulator)
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


def _check_roles(modules: list[IntrinsicModule], fusion: str) -> None:
    """Refuse a lifelong x episodic fusion whose modules do not play its roles."""
    if fusion not in ("ngu", "noveld"):
        return
    episodic = [m.name for m in modules if m.episodic]
    lifelong = [m.name for m in modules if not m.episodic]
    if fusion == "ngu" and (not episodic or not lifelong):
        raise ValueError(
            f"fusion='ngu' multiplies episodic bonuses by lifelong modulators: it needs at "
            f"least one of each, got episodic {episodic} and lifelong {lifelong} "
            "(e.g. intrinsic.make('rnd,episodic', ..., fusion='ngu'))"
        )
    if fusion == "noveld":
        counts = [m for m in modules if m.episodic and hasattr(m, "last_visits")]
        novelty = [m for m in modules if not m.episodic and callable(getattr(m, "novelty", None))]
        if len(modules) != 2 or len(counts) != 1 or len(novelty) != 1:
            raise ValueError(
                "fusion='noveld' takes two modules: one lifelong module with novelty() (rnd, "
                "count) and one episodic count (episodic), got "
                f"{[m.name for m in modules]} (e.g. intrinsic.make('rnd,episodic', ..., "
                "fusion='noveld'))"
            )
