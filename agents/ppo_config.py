"""PPO's hyperparameters (:class:`PPOConfig`), its value heads and what a saved model holds
besides its tensors: the config's checks, the value-head parsing, and the spaces as data."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch

from rewardlab.agents.common import HyperparameterCheck, LearnerConfig
from rewardlab.agents.networks import RECURRENT_CORES
from rewardlab.intrinsic.base import IntrinsicModule

HEAD_OPTIONS = ("gamma", "weight", "episodic")
SUMMED_REWARD_HEAD = "reward"
INTRINSIC_COMPONENT = "intrinsic"

@dataclass(frozen=True)
class ValueHead:
    """One value head of the critic: the reward component it predicts and how.

    :param component: name of the reward component (``SUMMED_REWARD_HEAD`` for the env's reward).
    :param gamma: its discount.
    :param weight: its advantage's weight in the policy loss.
    :param episodic: whether its returns stop at episode ends (False: RND's intrinsic stream).
    """

    component: str
    gamma: float
    weight: float = 1.0
    episodic: bool = True


#: the rollout size (n_steps * num_envs) that the default n_steps aims at
ROLLOUT_TARGET = 2048


def default_n_steps(num_envs: int) -> int:
    """Steps per env per rollout when ``n_steps`` is None: about :data:`ROLLOUT_TARGET`
    transitions per rollout, at least 16 steps (GAE needs some horizon)."""
    return max(16, round(ROLLOUT_TARGET / num_envs))


@dataclass(frozen=True)
class PPOConfig(LearnerConfig):
    """PPO's hyperparameters, named once: SB3's names and, where they still make sense for
    hundreds of batched envs, SB3's defaults. ``n_steps`` is per env, so a rollout has
    ``n_steps * env.num_envs`` transitions; by default it is chosen for about
    :data:`ROLLOUT_TARGET` transitions whatever the number of envs (many envs, short
    rollouts), and the learning rate is 1e-3 rather than SB3's 3e-4: with these defaults
    PPO solves CartPole-v1 and Acrobot-v1 within 100,000 steps on 16 and on 64 envs
    (``benchmarks/ppo_defaults.py``).

    Checked when made (a bad value raises ``ValueError`` naming it); saved with the model
    as plain data (:meth:`to_dict`, :meth:`from_dict`). ``PPO(env, **changes)`` and
    ``PPO(env, config=..., **changes)`` start from the defaults or from ``config``.

    Example::

        config = PPOConfig(n_steps=64, learning_rate=1e-3)
        faster = config.replace(n_epochs=4)

    :param learning_rate: Adam's step size.
    :param anneal_lr: decay the learning rate linearly to 0 over each ``learn`` call.
    :param n_steps: steps per env per rollout; None: :func:`default_n_steps` of the env's
        ``num_envs`` (2048 / num_envs rounded, at least 16).
    :param batch_size: minibatch size; None: a quarter of the rollout.
    :param n_epochs: passes over each rollout.
    :param gamma: discount (the default for every value head).
    :param gae_lambda: GAE's lambda.
    :param clip_range: PPO's ratio clip.
    :param clip_range_vf: clip of the value prediction around its rollout value (SB3's:
        the clipped prediction replaces the unclipped one); None: no clipping.
    :param normalize_advantage: normalise the (weighted) advantages per minibatch.
    :param ent_coef: entropy bonus coefficient.
    :param vf_coef: value-loss coefficient (the value loss sums the heads' MSEs).
    :param max_grad_norm: clip of the global gradient norm.
    :param target_kl: stop an update's epochs once a minibatch's approximate KL exceeds
        ``1.5 * target_kl`` (SB3's rule; reading the KL costs a host sync per minibatch);
        None: never stop early.
    :param normalize_obs: whiten observations with running statistics.
    :param normalize_reward: scale each head's reward by the running std of its discounted
        return (each head is scaled on its own, as RND does with its intrinsic stream).
    :param clip_obs: bound on normalised observations.
    :param clip_reward: bound on scaled rewards.
    :param net_arch: hidden sizes shared by actor and critic, or ``{"pi": [...], "vf": [...]}``.
    :param activation: ``"tanh"`` or ``"relu"``.
    :param log_std_init: initial log-std of the Gaussian policy (Box actions).
    :param image_shape: the observations are images of this ``(height, width, channels)``
        (flat or not; MiniGrid's view is ``(7, 7, 3)``): actor and critic each read them
        through a small CNN (``agents.networks.ImageEncoder``) before their ``net_arch``.
        None: the MLPs read the observation flattened.
    :param intrinsic_coef: with an ``intrinsic`` module and ``value_heads=None``, the weight
        of the intrinsic head's advantage (the env's reward head has weight 1).
    :param intrinsic_gamma: that intrinsic head's discount.
    :param value_heads: None: one head on the env's summed reward, and with an ``intrinsic``
        module a second, non-episodic one on its bonus (RND's two-stream critic: intrinsic
        returns run on through episode ends; ``intrinsic_coef``, ``intrinsic_gamma``). Otherwise the reward
        components to give a head each, as a list of names or a dict ``name -> {"gamma":
        float, "weight": float, "episodic": bool}`` (defaults: ``gamma``, 1.0, True).
        Names must be in ``info["reward_components"]`` or be ``"intrinsic"`` when an
        ``intrinsic`` module is given. Reward not covered by a head is not learned from.
    :param recurrent: None (a policy without memory), ``"gru"`` or ``"lstm"``: a recurrent
        core between the observation's reader (``net_arch``'s input, or ``image_shape``'s
        CNN) and the actor's and critic's MLPs, shared by both (CleanRL's ``ppo_atari_lstm``;
        SB3-contrib's ``RecurrentPPO`` with ``shared_lstm=True``). Its memory is carried
        across a rollout's steps per env and zeroed where an episode ended; the update
        re-runs each env's whole rollout from the memory it started with (truncated
        backpropagation over ``n_steps``), so minibatches are whole env sequences:
        ``batch_size`` must be a multiple of ``n_steps`` (``batch_size // n_steps`` envs a
        minibatch; by default a quarter of the envs, at least one). With ``compile`` the
        same code compiles: the rollout's steps carry the memory, and the minibatch step
        re-runs its sequences inside the compiled update (one graph step per rollout step,
        so a long ``n_steps`` compiles for longer); the values are re-run eagerly.
    :param recurrent_hidden_size: the recurrent core's width (SB3-contrib's
        ``lstm_hidden_size``).
    :param compile: run each minibatch's update (forward, loss, backward, gradient
        clipping, Adam) as one function compiled ahead of time (``rewardlab.agents.fused``),
        and so the rollout's step of the policy and its values (the same numbers up to float
        rounding). On a batched env stepped by ``BatchedEnv``'s own step, bare or under
        wrappers whose steps are tensor math (``BatchedPotentialShaping`` with this
        package's potentials), the rollout runs :data:`MAX_FUSED_STEPS` steps of the policy
        and the env in one compiled call (``docs/batched_envs.md``, "Steps compiled by a
        caller"). The first run with given networks, minibatch size
        and loss settings compiles for tens of seconds and caches the result on disk
        (``$REWARDLAB_CACHE``); later processes load it in about a second. Pays for long
        runs: ``benchmarks/ppo_speed.py`` measures it.
    """

    learner: ClassVar[str] = "PPO"

    learning_rate: float = 1e-3
    anneal_lr: bool = False
    n_steps: int | None = None
    batch_size: int | None = None
    n_epochs: int = 10
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    clip_range_vf: float | None = None
    normalize_advantage: bool = True
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    normalize_obs: bool = False
    normalize_reward: bool = False
    clip_obs: float = 10.0
    clip_reward: float = 10.0
    net_arch: Sequence[int] | Mapping[str, Sequence[int]] = (64, 64)
    activation: str = "tanh"
    log_std_init: float = 0.0
    image_shape: Sequence[int] | None = None
    intrinsic_coef: float = 1.0
    intrinsic_gamma: float = 0.99
    value_heads: Sequence[str] | Mapping[str, Mapping[str, Any]] | None = None
    recurrent: str | None = None
    recurrent_hidden_size: int = 128
    compile: bool = False

    def __post_init__(self) -> None:
        check_config(self)
        # plain lists and dicts, so the config saves as data torch.load(weights_only=True) reads
        object.__setattr__(self, "net_arch", _plain_net_arch(self.net_arch))
        if self.image_shape is not None:
            object.__setattr__(self, "image_shape", [int(size) for size in self.image_shape])
        object.__setattr__(self, "value_heads", _plain_value_heads(self.value_heads))

    def discount(self, component: str) -> float:
        """The discount of the value head that learns ``component`` (its own ``gamma`` in
        ``value_heads``), else ``gamma``.

        :param component: a reward component's name (``"shaping"``).
        """
        for head in parse_value_heads(self.value_heads, self.gamma):
            if head.component == component:
                return float(head.gamma)
        return float(self.gamma)


def check_config(config: PPOConfig) -> None:
    """Check every hyperparameter, naming the one that is wrong."""
    check = HyperparameterCheck(config)
    hp, fail, number = check.values, check.fail, check.number

    for name in ("n_steps", "n_epochs"):
        if name == "n_steps" and hp[name] is None:
            continue  # chosen from the env's num_envs (default_n_steps)
        if not isinstance(hp[name], int) or isinstance(hp[name], bool) or hp[name] < 1:
            fail(name, "a positive integer" + (" or None (chosen from num_envs)" if name == "n_steps" else ""))
    if hp["batch_size"] is not None:
        smallest = 2 if hp["normalize_advantage"] else 1
        if not isinstance(hp["batch_size"], int) or hp["batch_size"] < smallest:
            fail(
                "batch_size",
                f"None or an integer >= {smallest} (advantages are normalised per minibatch)",
            )
    for name in ("gamma", "gae_lambda", "intrinsic_gamma"):
        if not number(name) or not 0.0 <= hp[name] <= 1.0:
            fail(name, "a number in [0, 1]")
    for name in ("learning_rate", "clip_range", "clip_obs", "clip_reward"):
        if not number(name) or hp[name] <= 0:
            fail(name, "a positive number")
    if not (isinstance(hp["max_grad_norm"], int | float) and hp["max_grad_norm"] > 0):
        fail("max_grad_norm", "a positive number (math.inf: no clipping)")
    for name in ("clip_range_vf", "target_kl"):
        if hp[name] is not None and (not number(name) or hp[name] <= 0):
            fail(name, "None or a positive number")
    for name in ("ent_coef", "vf_coef", "intrinsic_coef"):
        if not number(name) or hp[name] < 0:
            fail(name, "a number >= 0")
    if not number("log_std_init"):
        fail("log_std_init", "a finite number")
    for name in ("anneal_lr", "normalize_advantage", "normalize_obs", "normalize_reward", "compile"):
        if not isinstance(hp[name], bool):
            fail(name, "True or False")
    if hp["recurrent"] not in (None, *RECURRENT_CORES):
        fail("recurrent", "None, " + " or ".join(repr(name) for name in RECURRENT_CORES))
    size = hp["recurrent_hidden_size"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        fail("recurrent_hidden_size", "a positive integer")
    if hp["activation"] not in ("tanh", "relu"):
        fail("activation", "'tanh' or 'relu'")
    shape = hp["image_shape"]
    if shape is not None and not (
        isinstance(shape, Sequence) and len(shape) == 3
        and all(isinstance(size, int) and not isinstance(size, bool) and size >= 7 for size in shape[:2])
        and isinstance(shape[2], int) and not isinstance(shape[2], bool) and shape[2] >= 1
    ):
        fail("image_shape", "None or (height, width, channels): integers, height and width at least 7 (the encoder's convolutions and pool)")
    split_net_arch(hp["net_arch"])


def split_net_arch(net_arch: Any) -> tuple[list[int], list[int]]:
    """``(pi_sizes, vf_sizes)`` from a list of sizes or ``{"pi": [...], "vf": [...]}``."""

    def sizes(value: Any) -> list[int]:
        if (
            isinstance(value, str | bytes)
            or not isinstance(value, Sequence)
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        ):
            raise ValueError(
                "net_arch must be a list of positive layer sizes or {'pi': [...], 'vf': [...]}, "
                f"got net_arch={net_arch!r}"
            )
        return list(value)

    if isinstance(net_arch, Mapping):
        if set(net_arch) != {"pi", "vf"}:
            raise ValueError(
                f"net_arch as a dict needs exactly the keys 'pi' and 'vf', got net_arch={net_arch!r}"
            )
        return sizes(net_arch["pi"]), sizes(net_arch["vf"])
    return sizes(net_arch), sizes(net_arch)


def _plain_net_arch(arch: Any) -> Any:
    return {k: list(v) for k, v in arch.items()} if isinstance(arch, Mapping) else list(arch)


def _plain_value_heads(heads: Any) -> Any:
    if heads is None:
        return None
    return {n: dict(o) for n, o in heads.items()} if isinstance(heads, Mapping) else list(heads)


# Settings for Gymnasium's MuJoCo locomotion tasks (envs.make("Hopper-v5", num_envs=
# MUJOCO_NUM_ENVS), then PPO(env, config=MUJOCO_CONFIG)), chosen with
# benchmarks/mujoco_ppo.py. PPO's own defaults suit classic control with many envs; these are
# the PPO paper's MuJoCo settings spread over 16 envs (rollouts of 2048 steps, normalised
# observations and rewards, annealed learning rate), with minibatches of 128 instead of 64:
# as sample-efficient in short trials and quicker per update.
MUJOCO_NUM_ENVS = 16
MUJOCO_CONFIG = PPOConfig(
    n_steps=128, batch_size=128, n_epochs=10, learning_rate=3e-4, anneal_lr=True, gamma=0.99,
    gae_lambda=0.95, normalize_obs=True, normalize_reward=True, log_std_init=0.0, ent_coef=0.0,
)  # fmt: skip


def check_spaces(
    observation_space: gymnasium.spaces.Space, action_space: gymnasium.spaces.Space
) -> None:
    if not isinstance(observation_space, gymnasium.spaces.Box):
        raise ValueError(f"PPO needs a Box observation space, got {observation_space}")
    if isinstance(action_space, gymnasium.spaces.Discrete):
        if int(action_space.start) != 0:
            raise ValueError(f"PPO needs Discrete actions starting at 0, got {action_space}")
    elif not (isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1):
        raise ValueError(f"PPO supports Discrete and 1-D Box action spaces, got {action_space}")


def parse_value_heads(value_heads: Any, gamma: float) -> list[ValueHead]:
    """The value heads from ``value_heads=``: None, a list of names, or names -> options."""
    if value_heads is None:
        return [ValueHead(SUMMED_REWARD_HEAD, gamma)]
    if (
        isinstance(value_heads, str)
        or not isinstance(value_heads, Sequence | Mapping)
        or not value_heads
    ):
        raise ValueError(
            "value_heads must be None, a non-empty list of reward component names, or a dict "
            f"name -> {{'gamma', 'weight', 'episodic'}}, got value_heads={value_heads!r}"
        )
    items = (
        value_heads.items() if isinstance(value_heads, Mapping) else [(n, {}) for n in value_heads]
    )
    heads, seen = [], set()
    for name, options in items:
        if not isinstance(name, str) or not name or name == SUMMED_REWARD_HEAD or name in seen:
            raise ValueError(
                f"value_heads names must be distinct reward component names (not "
                f"{SUMMED_REWARD_HEAD!r}, the summed reward), got {name!r} in value_heads={value_heads!r}"
            )
        seen.add(name)
        if not isinstance(options, Mapping) or set(options) - set(HEAD_OPTIONS):
            raise ValueError(
                f"value_heads[{name!r}] must be a dict with keys among {HEAD_OPTIONS}, got {options!r}"
            )
        head = ValueHead(
            name,
            gamma=options.get("gamma", gamma),
            weight=options.get("weight", 1.0),
            episodic=options.get("episodic", True),
        )
        if not isinstance(head.gamma, int | float) or not 0.0 <= head.gamma <= 1.0:
            raise ValueError(
                f"value_heads[{name!r}]['gamma'] must be in [0, 1], got {head.gamma!r}"
            )
        if not isinstance(head.weight, int | float) or not math.isfinite(head.weight):
            raise ValueError(
                f"value_heads[{name!r}]['weight'] must be a finite number, got {head.weight!r}"
            )
        if not isinstance(head.episodic, bool):
            raise ValueError(
                f"value_heads[{name!r}]['episodic'] must be True or False, got {head.episodic!r}"
            )
        heads.append(head)
    return heads


def check_intrinsic(intrinsic: Any, value_heads: Any) -> None:
    if intrinsic is None:
        return
    if not isinstance(intrinsic, IntrinsicModule):
        raise TypeError(
            f"intrinsic={intrinsic!r} is not a rewardlab.intrinsic.IntrinsicModule; subclass it "
            "(compute(obs, actions, next_obs, dones) -> (B,) and update(obs, actions, next_obs))"
        )
    names = list(value_heads) if value_heads is not None else [INTRINSIC_COMPONENT]
    if INTRINSIC_COMPONENT not in names:
        raise ValueError(
            f"value_heads={names} has no 'intrinsic' head for the bonus of "
            f"intrinsic={intrinsic.name!r}; add one (e.g. {{'intrinsic': {{'gamma': 0.99, "
            "'episodic': False}}) or leave value_heads=None for a non-episodic intrinsic head"
        )


def space_to_dict(space: gymnasium.spaces.Space) -> dict[str, Any]:
    if isinstance(space, gymnasium.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n)}
    return {
        "type": "Box",
        "low": torch.as_tensor(space.low),
        "high": torch.as_tensor(space.high),
        "dtype": str(np.dtype(space.dtype)),
    }


def space_from_dict(data: dict[str, Any]) -> gymnasium.spaces.Space:
    if data["type"] == "Discrete":
        return gymnasium.spaces.Discrete(data["n"])
    dtype = np.dtype(data["dtype"])
    return gymnasium.spaces.Box(data["low"].numpy(), data["high"].numpy(), dtype=dtype)
