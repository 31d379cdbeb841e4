"""Base classes of the batched environments: :class:`BatchedEnv` and :class:`BatchedWrapper`.

A batched environment keeps the state of ``num_envs`` copies of one task in torch tensors
on one device and steps them all with one call of pure tensor math (no Python loop over
envs), as gymnax's environments do. What a user can rely on is ``docs/batched_envs.md``.

Writing an env: subclass :class:`BatchedEnv`, set ``gymnasium_id`` and ``state_dim``, pass
the single observation and action spaces to ``__init__``, and write three pure functions
of a batch of states, held ``(state_dim, num_envs)``:

- ``reset_bounds(options) -> (low, high)``: the box that reset states are drawn from;
- ``transition(state, actions) -> (next_state, reward, terminated)``;
- ``observe(state) -> obs``.

The base class gives the rest: ``reset``; ``step`` with the action checks, the time limit,
same-step autoreset (``info["final_obs"]``) and seeding; ``render``; ``compile=True``; and
the carried step, which a learner runs in its own loop or traces into its own graph:

- ``carried()``: what one step hands the next (the state and each episode's elapsed steps);
- ``reset_states_ahead(steps)``: the reset states of the next ``steps`` steps (``fresh``);
- ``advance_carried(carry, actions, fresh) -> (carry, step, components)``: one step;
- ``commit_carried(carry, done, actions)``: the last carry becomes the env's own.

``step`` is those in a row. An env that overrides ``step`` or ``reset`` (MiniGrid's,
MuJoCo's) keeps its own step, and learners call it (:func:`carried_steps`). A wrapper
(:class:`BatchedWrapper`) overrides ``step``, or writes ``advance_carried`` over
:attr:`BatchedWrapper.carried_env` and gets its ``step`` from it.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from torch.fx.experimental.proxy_tensor import make_fx

from rewardlab.common.compiled import NotLoadedError, load_or_compile, source_fingerprint
from rewardlab.common.threads import DEFAULT_THREADS, ThreadsSetting, at_own_threads

Actions = torch.Tensor | np.ndarray
StepReturn = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]

# Reset states are drawn in bulk, into a pool of REFILL_EVERY pre-drawn states per env:
# at the k-th step after a refill, an env whose episode ends takes its state of
# generation k (pool column k * num_envs + i, a contiguous slice for all envs, so no
# gather). After REFILL_EVERY steps the states taken are drawn again, exactly as many as
# were taken. A step then draws no random numbers and reads nothing back from the
# device; the refill is the only host sync.
REFILL_EVERY = 16

# What a BatchedEnv holds that changes as it runs, not what its step computes: left out of
# BatchedEnv.step_fingerprint.
_RUN_STATE = frozenset({
    "_state", "_elapsed", "_pool", "_pool_steps", "_ended_since_refill", "_steps_since_refill",
    "_reset_low", "_reset_high", "_last_actions", "_render_env", "_compiled", "generator",
    "compile", "_threads",
})  # fmt: skip


# How the carried steps running now run, one value for a whole stack of wrappers: "step"
# within a step() call, which checks what it is given (the actions' range, a potential's
# values) and may run the env's compiled step; "traced" while traced into a graph, in the
# form that compiles best; None in a learner's eager steps, the formula alone.
_STEP_FORM: ContextVar[str | None] = ContextVar("step_form", default=None)


def in_step() -> bool:
    """Whether the carried steps running now are one ``step`` call's, which checks what it
    is given at each step, rather than a learner's (eager or traced), the formula alone."""
    return _STEP_FORM.get() == "step"


def _traced() -> bool:
    """Whether the carried steps running now are being traced into a graph."""
    return _STEP_FORM.get() == "traced"


@contextlib.contextmanager
def _step_form(form: str | None) -> Iterator[None]:
    """Run the carried steps of the ``with`` block in ``form`` (see ``_STEP_FORM``).

    :param form: ``"step"``, ``"traced"`` or ``None``.
    """
    token = _STEP_FORM.set(form)
    try:
        yield
    finally:
        _STEP_FORM.reset(token)


class WholeNumberBox(spaces.Box):
    """A float ``Box`` whose values are always whole numbers: one-hot cells, presence bits,
    integer grids handed out as floats.

    To every reader it is the ``Box`` it subclasses; the type only says what the bounds
    cannot, so that :class:`rewardlab.intrinsic.Count` counts these observations exactly
    where it hashes other float ``Box`` observations as continuous values.

    Example::

        >>> import numpy as np
        >>> from rewardlab.envs import WholeNumberBox
        >>> WholeNumberBox(0.0, 1.0, (9,), np.float32)   # the one-hot cell of a 3 x 3 grid
        WholeNumberBox(0.0, 1.0, (9,), float32)
    """

    def __repr__(self) -> str:
        return "WholeNumberBox" + super().__repr__().removeprefix("Box")


def resolve_device(device: str | torch.device) -> torch.device:
    """Turn ``device`` into a :class:`torch.device`, checking that it exists here.

    :param device: a device such as ``"cpu"``, ``"cuda"`` or ``"cuda:1"``
    :return: the device, with the current CUDA index filled in for a bare ``"cuda"``
    """
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"device={device!r} is not a torch device; use 'cpu', 'cuda' or 'cuda:<index>'"
        ) from error
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} was asked for but CUDA is not available on this machine; "
                "use device='cpu'"
            )
        index = torch.cuda.current_device() if resolved.index is None else resolved.index
        if index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r} does not exist: this machine has "
                f"{torch.cuda.device_count()} CUDA device(s)"
            )
        resolved = torch.device("cuda", index)
    elif resolved.type != "cpu":
        raise ValueError(f"device={device!r} is not supported; use 'cpu' or 'cuda'")
    return resolved


def object_fingerprint(obj: Any, source: str, skip: frozenset[str] = frozenset()) -> str:
    """A hash of what ``obj``'s traced code depends on beyond ``source`` (the hash of the
    package source that covers rewardlab's own classes): the source of the modules its
    classes outside rewardlab are defined in, and its attributes but for ``skip`` (tensors
    by their bytes). Names a compiled graph's recipe without tracing it."""
    parts: list[str] = [source]
    for cls in type(obj).__mro__:
        module = sys.modules.get(cls.__module__)
        if cls is object or module is None or cls.__module__.startswith("rewardlab."):
            parts.append(cls.__qualname__)
            continue
        try:
            parts.append(f"{cls.__qualname__}: {inspect.getsource(module)}")
        except (OSError, TypeError):  # no source file: the class's identity
            parts.append(f"{cls.__module__}.{cls.__qualname__} at {id(cls)}")
    digest = hashlib.sha256("\n".join(parts).encode())
    for name, value in sorted(vars(obj).items()):
        if name in skip:
            continue
        digest.update(name.encode())
        if isinstance(value, torch.Tensor):
            digest.update(f"{value.dtype} {tuple(value.shape)}".encode())
            digest.update(value.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        else:
            digest.update(repr(value).encode())
    return digest.hexdigest()


class Batched(ThreadsSetting):
    """What batched envs and their wrappers share: the Gymnasium and SB3 views of ``self``,
    and the torch threads their steps run at.

    Defined once here, so a wrapper adapts itself (its reward included), never the env
    beneath it. Every ``step`` and ``reset`` of a subclass, a user's own included, runs at
    :attr:`threads` torch intra-op threads (1 by default on a CPU; set ``env.threads = None``
    to step at torch's own setting) and gives the caller back its own count when it returns
    (:mod:`rewardlab.common.threads`). A stack of wrappers shares its env's setting.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("step", "reset"):
            method = cls.__dict__.get(name)
            if callable(method):
                setattr(cls, name, at_own_threads(method))

    @property
    def _steps_by_advance(self) -> bool:
        """Whether a learner may run :meth:`BatchedEnv.advance_carried` in place of ``step``.
        False here: the step is the env's or wrapper's own (a MuJoCo task's, an adapted
        Gymnasium env's, a wrapper's). :class:`BatchedEnv`, and a wrapper whose step is
        tensor math on it, say True."""
        return False


class BatchedEnv(Batched):
    """``num_envs`` copies of one environment, stepped together as torch tensors on ``device``.

    Subclasses describe one task as pure batched functions and this class does the rest:
    action checks, the time limit, same-step autoreset with ``info["final_obs"]``,
    seeding, rendering through Gymnasium and the Gymnasium / SB3 adapters.

    A subclass sets ``gymnasium_id``, ``state_dim``, the single spaces and implements

    - :meth:`reset_bounds`: the box that reset states are drawn from, uniformly;
    - :meth:`transition`: ``(state, actions) -> (next_state, reward, terminated)``;
    - :meth:`observe`: ``state -> observation``.

    States are held variable-major, ``(state_dim, num_envs)``, so that each state variable
    is one contiguous row: compiled steps then run as SIMD loops over envs (with an
    env-major layout Inductor emits scalar code, about twice as slow).

    Example::

        >>> from rewardlab import envs
        >>> env = envs.make("CartPole-v1", num_envs=4, seed=0)
        >>> obs, info = env.reset()
        >>> obs.shape
        torch.Size([4, 4])
        >>> obs, reward, terminated, truncated, info = env.step(torch.ones(4, dtype=torch.int64))
        >>> sorted(info)
        ['final_obs', 'reward_components']

    :param num_envs: how many copies to run, at least 1
    :param single_observation_space: the observation space of one copy
    :param single_action_space: the action space of one copy (``Discrete`` or ``Box``)
    :param device: the torch device that holds the state (``"cpu"`` or ``"cuda[:i]"``)
    :param seed: seed of the env's random generator; ``None`` seeds it from the OS
    :param max_episode_steps: the time limit; ``None`` takes Gymnasium's for ``gymnasium_id``
    :param compile: compile the step ahead of time with AOTInductor at the first
        :meth:`step`, or load it from the on-disk cache where this env with these
        ``num_envs``, constants and device was compiled before (``rewardlab.common.compiled``):
        compiling takes seconds to tens of seconds once per machine, loading well under a
        second; compiled steps are several times faster than eager ones. The env's
        constants, such as ``max_episode_steps``, are compiled in. In a process that may
        not read the cache (``rewardlab.common.compiled.loaded_only``: the sandbox's workers)
        and was not handed this step compiled, the step runs eagerly and ``compile`` turns False
    :param validate_actions: check that discrete actions are in range at every step; the
        check reads one value back from the device, so turn it off in GPU training loops
        whose actions come from a policy
    """

    gymnasium_id: str
    state_dim: int
    state_dtype: torch.dtype = torch.float32
    metadata: dict[str, Any] = {
        "render_modes": ["rgb_array"],
        "autoreset_mode": AutoresetMode.SAME_STEP,
    }
    render_mode = "rgb_array"

    def __init__(
        self,
        num_envs: int,
        single_observation_space: spaces.Box,
        single_action_space: spaces.Discrete | spaces.Box,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        max_episode_steps: int | None = None,
        compile: bool = False,
        validate_actions: bool = True,
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise TypeError(f"num_envs must be an int, got {num_envs!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        if not isinstance(single_action_space, spaces.Discrete | spaces.Box):
            raise TypeError(
                f"single_action_space must be Discrete or Box, got {single_action_space}"
            )
        if max_episode_steps is None:
            max_episode_steps = gymnasium.spec(self.gymnasium_id).max_episode_steps
        if not isinstance(max_episode_steps, int | np.integer) or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be a positive int, got {max_episode_steps!r}")
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.max_episode_steps = int(max_episode_steps)
        self.spec_id = self.gymnasium_id
        self.validate_actions = validate_actions
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = batch_space(single_observation_space, self.num_envs)
        self.action_space = batch_space(single_action_space, self.num_envs)
        self.generator = torch.Generator(device=self.device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)

        # Discrete actions must lie in this range; Box actions are clipped by the task itself.
        self._action_range: tuple[int, int] | None = None
        if isinstance(single_action_space, spaces.Discrete):
            low = int(single_action_space.start)
            self._action_range = (low, low + int(single_action_space.n) - 1)
        self._state: torch.Tensor | None = None
        self._last_actions: torch.Tensor | None = None
        self._render_env: gymnasium.Env | None = None
        self.compile = compile
        self._compiled: Callable[..., tuple[torch.Tensor, ...]] | None = None
        # steps the reset-state pool holds; grown by reset_states_ahead, never shrunk
        self._pool_steps = REFILL_EVERY

    # ----------------------------------------------------------------- the task
    def reset_bounds(
        self, options: dict[str, Any] | None
    ) -> tuple[Sequence[float], Sequence[float]]:
        """The box ``[low, high]`` (one value per state dimension) that reset states are drawn from.

        :param options: the ``options`` given to :meth:`reset`, as Gymnasium's env takes them
        :return: ``(low, high)``
        """
        raise NotImplementedError

    def transition(
        self, state: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Advance every copy by one step, without time limit or reset.

        :param state: ``(state_dim, num_envs)`` states
        :param actions: checked actions, ``(num_envs,)`` int64 or ``(num_envs, *shape)`` float32
        :return: ``(next_state, reward, terminated)``: ``(state_dim, num_envs)`` states, float32
            and bool ``(num_envs,)``
        """
        raise NotImplementedError

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The float32 observations ``(num_envs, *obs_shape)`` of ``state``.

        :param state: ``(state_dim, num_envs)`` states
        """
        raise NotImplementedError

    def _transposed_state(self, state: torch.Tensor) -> torch.Tensor:
        """``state`` as ``(num_envs, state_dim)``, for tasks whose observation is the state.

        Eager, the transpose itself (a view; :meth:`step` copies what it hands out). While
        the step is traced for ``compile=True``, its rows stacked, which Inductor compiles
        to faster code than a transpose (CartPole at 4096 envs in a trial of
        ``benchmarks/env_throughput.py`` when this was written).

        :param state: ``(state_dim, num_envs)``
        """
        if _traced():
            return torch.stack(state.unbind(0), dim=1)
        return state.T

    # ------------------------------------------------------------- the contract
    @property
    def state(self) -> torch.Tensor:
        """The current state as ``(num_envs, state_dim)``; row ``i`` is Gymnasium's ``env.state``.

        A view of the env's own tensor: read it, do not write to it.
        """
        if self._state is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        return self._state.T

    @property
    def unwrapped(self) -> BatchedEnv:
        """This env (wrappers return the env at the bottom of the stack)."""
        return self

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every copy.

        :param seed: reseed the env's generator first (``None`` continues its stream)
        :param options: passed to :meth:`reset_bounds` (e.g. ``{"low": -0.1, "high": 0.1}``);
            the bounds stay in force for the autoresets that follow, as in Gymnasium
        :return: ``(obs, info)`` with obs float32 ``(num_envs, *obs_shape)``
        """
        if seed is not None:
            self.generator.manual_seed(seed)
        bounds = torch.tensor(
            self.reset_bounds(options), dtype=self.state_dtype, device=self.device
        )
        self._reset_low, self._reset_high = bounds.unsqueeze(2)
        self._state = self._draw_reset_states(self.num_envs)
        self._elapsed = torch.zeros(self.num_envs, dtype=torch.int32, device=self.device)
        # Pool column k * num_envs + i holds env i's k-th next reset state.
        self._pool = self._draw_reset_states(self._pool_steps * self.num_envs)
        # each commit's ended episodes, bool (steps, num_envs), and how many steps they hold
        self._ended_since_refill: list[torch.Tensor] = []
        self._steps_since_refill = 0
        self._last_actions = None
        return self.observe(self._state).clone(), {}

    def step(self, actions: Actions) -> StepReturn:
        """Advance every copy by one step; copies whose episode ends are reset in the same call.

        :param actions: ``(num_envs,)`` integers for ``Discrete``, ``(num_envs, *shape)``
            floats for ``Box``; a tensor or numpy array
        :return: ``(obs, reward, terminated, truncated, info)``; ``info["final_obs"]`` holds
            the last observation of the episodes that ended and ``info["reward_components"]``
            the reward by name (``"extrinsic"``)
        """
        return _step_by_advance(self, actions)

    # ------------------------------------------------------------ the carried step
    # A learner runs the env's steps in its own loop, or traces them with its policy into
    # one compiled function of several steps (rewardlab.agents.ppo): it takes the reset
    # states of those steps ahead, runs advance_carried on the carry, and commits the last.

    def reset_states_ahead(self, steps: int) -> torch.Tensor:
        """The reset states that the next ``steps`` steps take, ``(state_dim, steps * num_envs)``
        (column ``k * num_envs + i``: env ``i``'s, should its episode end at the ``k``-th step).

        Refills the pool first where fewer than ``steps`` steps are left in it before the
        next refill, and grows it to ``steps`` steps if it is smaller, so that no refill
        (which draws random numbers) falls among them. Stepping with :meth:`step` after
        this call takes the same states: a caller that calls it before each batch of
        steps, compiled or not, gets the same episodes from the same seed.

        :param steps: how many steps will follow, at least 1.
        """
        if self._state is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
            raise ValueError(f"steps must be a positive int, got {steps!r}")
        taken = self._steps_since_refill
        if taken + steps > self._pool_steps:
            if taken:
                self._refill_pool()
            if steps > self._pool_steps:
                more = self._draw_reset_states((steps - self._pool_steps) * self.num_envs)
                self._pool = torch.cat([self._pool, more], dim=1)
                self._pool_steps = steps
            taken = 0
        return self._pool[:, taken * self.num_envs : (taken + steps) * self.num_envs]

    @property
    def _steps_by_advance(self) -> bool:
        """Whether :meth:`step` and :meth:`reset` are this class's own (not overridden), so
        that a step is :meth:`advance_carried` on the carry with the pool's reset states."""
        return type(self).step is BatchedEnv.step and type(self).reset is BatchedEnv.reset

    @property
    def advance_traces(self) -> bool:
        """Whether :meth:`advance_carried` is known to trace into a caller's graph as it runs: for
        rewardlab's own envs, and for any env made with ``compile=True`` (its user compiles
        the step). A user's step that reads a tensor's value in Python could be traced with
        the value it had, so it is not assumed to trace."""
        return type(self).__module__.startswith("rewardlab.") or bool(self.compile)

    #: the names of the reward components :meth:`advance_carried` returns, in its order
    component_names: tuple[str, ...] = ("extrinsic",)

    def carried(self) -> tuple[torch.Tensor, ...]:
        """What :meth:`advance_carried` carries from step to step: the state,
        ``(state_dim, num_envs)``, and the steps into each episode, int32 ``(num_envs,)``;
        the env's own tensors, to read."""
        if self._state is None:
            raise RuntimeError(f"{self} has no state yet: call reset() first")
        return self._state, self._elapsed

    def carried_example(self) -> tuple[torch.Tensor, ...]:
        """Tensors of :meth:`carried`'s shapes and dtypes, zeros (before a reset too)."""
        state = torch.zeros(
            (self.state_dim, self.num_envs), dtype=self.state_dtype, device=self.device
        )
        return state, torch.zeros(self.num_envs, dtype=torch.int32, device=self.device)

    def advance_carried(
        self, carry: Sequence[torch.Tensor], actions: torch.Tensor, fresh: torch.Tensor
    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """One step on a carry: ``(carry, (obs, reward, terminated, truncated, done,
        final_obs), components)``, the components in :attr:`component_names`' order.

        Within :meth:`step` (:func:`in_step`), compiled where ``compile=True`` and with the
        actions' range checked (see ``validate_actions``); else the step in the form it runs
        in a learner's steps: eager, or the traced form inside :meth:`traced_steps`.

        :param carry: :meth:`carried`, or the previous step's carry.
        :param actions: checked actions, as :meth:`transition` takes them.
        :param fresh: ``(state_dim, num_envs)`` reset states for the envs whose episode ends
            (this step's slice of :meth:`reset_states_ahead`).
        """
        inputs = (*carry, actions, fresh)
        checked = in_step()
        advance = (self._compiled_step(self._advance, inputs) if checked else None) or self._advance
        outputs = advance(*inputs)
        state, elapsed, obs, reward, terminated, truncated, done, final_obs, invalid = outputs
        # The range check is computed inside the step (one fused kernel when compiled) and
        # read back here, before anything is committed.
        if checked and self.validate_actions and self._action_range is not None and bool(invalid):
            self._raise_out_of_range(actions, *self._action_range)
        return (state, elapsed), (obs, reward, terminated, truncated, done, final_obs), (reward,)

    @contextlib.contextmanager
    def traced_steps(self) -> Iterator[None]:
        """While a caller traces :meth:`advance_carried` into its own graph: the step takes
        the form that compiles best, for every env and wrapper of the stack."""
        with _step_form("traced"):
            yield

    def step_fingerprint(self) -> str:
        """A text that determines :meth:`advance_carried`'s graph without tracing it: the source of
        the env's classes (the package's, or the module a class outside it is defined
        in) and the env's constants (its attributes, but for the state it runs on). A caller
        that compiles the step into its own graph names the graph's recipe with it."""
        return object_fingerprint(self, source_fingerprint("rewardlab.envs"), skip=_RUN_STATE)

    def commit_carried(
        self, carry: Sequence[torch.Tensor], done: torch.Tensor, actions: torch.Tensor
    ) -> None:
        """Take the result of steps run with :meth:`advance_carried` as the env's own.

        :param carry: the last step's carry, ``(state, elapsed)``.
        :param done: bool ``(steps, num_envs)``, each step's ended episodes (they took their
            reset states from :meth:`reset_states_ahead`, whose steps these were).
        :param actions: the last step's actions.
        """
        if done.shape[0] + self._steps_since_refill > self._pool_steps:
            raise ValueError(
                f"{done.shape[0]} steps committed but the pool held reset states for "
                f"{self._pool_steps - self._steps_since_refill}: call "
                "reset_states_ahead(steps) before running them"
            )
        (self._state, self._elapsed), self._last_actions = carry, actions
        self._ended_since_refill.append(done)
        self._steps_since_refill += done.shape[0]
        if self._steps_since_refill == self._pool_steps:
            self._refill_pool()

    def _as_action_tensor(self, actions: Actions) -> torch.Tensor:
        """Check the type, shape and dtype of a batch of actions and move it to ``device``.

        Discrete actions become int64 and Box actions float32. Whether discrete actions are
        in range is checked by :meth:`step` (see ``validate_actions``).

        :param actions: the actions given to :meth:`step`
        :raises TypeError: not a tensor or array, or of the wrong kind of dtype
        :raises ValueError: of the wrong shape
        """
        if isinstance(actions, np.ndarray):
            actions = torch.from_numpy(actions)
        elif not isinstance(actions, torch.Tensor):
            raise TypeError(
                f"actions must be a torch.Tensor or numpy array, got {type(actions).__name__}"
            )
        space = self.single_action_space
        expected = (self.num_envs, *space.shape)
        if tuple(actions.shape) != expected:
            raise ValueError(
                f"actions have shape {tuple(actions.shape)} but {self.spec_id} with "
                f"num_envs={self.num_envs} takes shape {expected}"
            )
        if isinstance(space, spaces.Discrete):
            if (
                actions.dtype.is_floating_point
                or actions.dtype.is_complex
                or actions.dtype == torch.bool
            ):
                raise TypeError(
                    f"actions for the Discrete({space.n}) space of {self.spec_id} must be "
                    f"integers, got dtype {actions.dtype}; cast them with .long()"
                )
            return actions.to(self.device, torch.int64).contiguous()
        if not actions.dtype.is_floating_point:
            raise TypeError(
                f"actions for the Box space of {self.spec_id} must be floats, got dtype "
                f"{actions.dtype}; cast them with .float()"
            )
        return actions.to(self.device, torch.float32).contiguous()

    def _raise_out_of_range(self, actions: torch.Tensor, low: int, high: int) -> None:
        index = int(((actions < low) | (actions > high)).nonzero()[0, 0])
        raise ValueError(
            f"action {int(actions[index])} of env {index} is outside the "
            f"{self.single_action_space} space of {self.spec_id}: discrete actions must be "
            f"in [{low}, {high}]"
        )

    def render(self, index: int = 0) -> np.ndarray:
        """Draw copy ``index`` with Gymnasium's own renderer.

        :param index: which copy to draw
        :return: an RGB array ``(height, width, 3)`` of uint8
        """
        if not 0 <= index < self.num_envs:
            raise ValueError(f"index={index} is not a copy of this env: use 0..{self.num_envs - 1}")
        if self._render_env is None:
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
            self._render_env = gymnasium.make(self.gymnasium_id, render_mode="rgb_array").unwrapped
            self._render_env.reset()
        self.write_gymnasium_state(self._render_env, index)
        return self._render_env.render()

    def write_gymnasium_state(self, gymnasium_env: gymnasium.Env, index: int) -> None:
        """Put copy ``index``'s state into an unwrapped Gymnasium env of the same task.

        :param gymnasium_env: e.g. ``gymnasium.make("CartPole-v1").unwrapped``, after reset
        :param index: which copy to copy
        """
        gymnasium_env.state = self.state[index].cpu().numpy().astype(np.float64)

    def close(self) -> None:
        """Release the renderer, if one was made."""
        if self._render_env is not None:
            self._render_env.close()
            self._render_env = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.spec_id}, num_envs={self.num_envs}, device={self.device})"
        )

    # ------------------------------------------------------------ the machinery
    def _draw_reset_states(self, count: int) -> torch.Tensor:
        uniform = torch.rand(
            (self.state_dim, count),
            generator=self.generator,
            device=self.device,
            dtype=self.state_dtype,
        )
        return self._reset_low + (self._reset_high - self._reset_low) * uniform

    def _refill_pool(self) -> None:
        # The envs that ended at the k-th step took pool columns k * num_envs + i.
        ended = self._ended_since_refill
        if self.device.type == "cpu":
            # numpy's flatnonzero is one thread and 4x faster than torch's nonzero, which
            # above 32768 elements waits for a second thread (milliseconds on a busy machine).
            flat = np.concatenate([flags.numpy().reshape(-1) for flags in ended])
            taken = torch.from_numpy(np.flatnonzero(flat))
        else:
            taken = torch.cat([flags.reshape(-1) for flags in ended]).nonzero().squeeze(1)
        if taken.numel():
            self._pool.index_copy_(1, taken, self._draw_reset_states(taken.numel()))
        self._ended_since_refill = []
        self._steps_since_refill = 0

    def _compiled_step(
        self, function: Callable[..., tuple[torch.Tensor, ...]], inputs: Sequence[torch.Tensor]
    ) -> Callable[..., tuple[torch.Tensor, ...]] | None:
        """The env's step ``function`` compiled (or loaded compiled) for these inputs' shapes,
        dtypes and device, made once; ``None`` without ``compile=True`` or where this process
        was not handed it (a confined one), which then steps eagerly.

        The step is traced to one graph and compiled without Dynamo: Dynamo would check its
        guards on every call, about 20 us of Python on a slow CPU, as long as the whole step
        of a thousand envs takes. Nothing the guards would check can change here: every input
        keeps the shape, dtype, device and memory layout it has now, and the env's
        constants are fixed at construction.

        :param function: a pure function of ``inputs`` returning tensors (:meth:`_advance`, or
            an env's own step that overrides :meth:`step`).
        :param inputs: the tensors it is called with.
        """
        if self.compile and self._compiled is None:
            options = {"cpp.threads": 1} if self.device.type == "cpu" else {}
            with _step_form("traced"):
                graph = make_fx(lambda *tensors: function(*tensors))(*inputs)
            try:
                name = f"{self.spec_id}-step"
                self._compiled = load_or_compile(graph, list(inputs), name, options)
            except NotLoadedError:  # a confined process that was not handed this env's step
                self.compile = False
        return self._compiled if self.compile else None

    def _advance(
        self,
        state: torch.Tensor,
        elapsed: torch.Tensor,
        actions: torch.Tensor,
        fresh: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        next_state, reward, terminated = self.transition(state, actions)
        elapsed = elapsed + 1
        truncated = elapsed >= self.max_episode_steps
        done = terminated | truncated
        final_obs = self.observe(next_state)
        if _traced():
            # Row by row, and the observations from the inputs rather than from the new
            # state: Inductor then fuses the step into fewer loops over envs (1.2x faster).
            state = torch.stack(
                [torch.where(done, fresh[row], next_state[row]) for row in range(self.state_dim)]
            )
            ended = done.view(-1, *[1] * (final_obs.dim() - 1))
            obs = torch.where(ended, self.observe(fresh), final_obs)
        else:
            # Eager, every operator is a dispatch: one where over the whole state, and the
            # observations of the new state (observe is elementwise per env, so this equals
            # choosing between the observations). observe may return a view of its state
            # (CartPole's is the transpose), so obs is copied: writing to it must not
            # change the env. final_obs views next_state, which nothing else holds.
            state = torch.where(done, fresh, next_state)
            obs = self.observe(state).clone()
        elapsed = elapsed.masked_fill(done, 0)
        if self._action_range is None:
            invalid = torch.zeros((), dtype=torch.bool, device=self.device)
        else:
            low, high = self._action_range
            smallest, largest = torch.aminmax(actions)
            invalid = (smallest < low) | (largest > high)
        return state, elapsed, obs, reward, terminated, truncated, done, final_obs, invalid


def _step_by_advance(stack: Any, actions: Actions) -> StepReturn:
    """One ``step`` of an env or wrapper from its carried step: the reset states of one step
    ahead, :meth:`BatchedEnv.advance_carried` with its checks (:func:`in_step`), then the
    commit. The one definition of the step of a :class:`BatchedEnv` and of a wrapper that
    writes its own ``advance_carried``.

    :param stack: a :class:`BatchedEnv`, or a :class:`BatchedWrapper` over one or over
        another env's :func:`carried_steps`.
    :param actions: the batch of actions, as :meth:`BatchedEnv.step` takes them.
    :return: ``(obs, reward, terminated, truncated, info)`` with ``info["final_obs"]`` and
        ``info["reward_components"]`` (by :attr:`BatchedEnv.component_names`).
    """
    base = getattr(stack, "unwrapped", None)
    if isinstance(base, BatchedEnv):
        actions = base._as_action_tensor(actions)
    fresh = stack.reset_states_ahead(1)
    with _step_form("step"):
        carry, step, components = stack.advance_carried(stack.carried(), actions, fresh)
    obs, reward, terminated, truncated, done, final_obs = step
    stack.commit_carried(carry, done.unsqueeze(0), actions)
    info = {
        "final_obs": final_obs,
        "reward_components": dict(zip(stack.component_names, components, strict=True)),
    }
    return obs, reward, terminated, truncated, info


class _AdvanceByStep:
    """The carried step of an env or wrapper whose step is its own (a MuJoCo task's, an
    adapted Gymnasium env's, a user's): each step calls its ``step``, the carry is empty
    and the reset states are its own, so that a learner runs one rollout code over every
    batched env. Not traceable.

    :param env: a batched env or wrapper (``num_envs``, ``device``, ``step``).
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        #: the reward components' names, in the order :meth:`advance_carried` returns them:
        #: ``info["reward_components"]``'s at the first step (None before it)
        self.component_names: tuple[str, ...] | None = None

    def carried(self) -> tuple[torch.Tensor, ...]:
        """Nothing: the env keeps its own state."""
        return ()

    def reset_states_ahead(self, steps: int) -> torch.Tensor:
        """None drawn ahead: an empty ``(0, steps * num_envs)`` tensor.

        :param steps: how many steps will follow.
        """
        return torch.empty((0, steps * self.env.num_envs), device=self.env.device)

    def advance_carried(
        self, carry: Sequence[torch.Tensor], actions: torch.Tensor, fresh: torch.Tensor
    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """The env's ``step``, in :meth:`BatchedEnv.advance_carried`'s form.

        :param carry: empty.
        :param actions: the batch of actions.
        :param fresh: empty.
        """
        obs, reward, terminated, truncated, info = self.env.step(actions)
        components = info.get("reward_components") or {"extrinsic": reward}
        if self.component_names is None:
            self.component_names = tuple(components)
        step = (obs, reward, terminated, truncated, terminated | truncated, info["final_obs"])
        return (), step, tuple(components[name] for name in self.component_names)

    def commit_carried(
        self, carry: Sequence[torch.Tensor], done: torch.Tensor, actions: torch.Tensor
    ) -> None:
        """Nothing to commit: each step was the env's own.

        :param carry: empty.
        :param done: each step's ended episodes.
        :param actions: the last step's actions.
        """


def carried_steps(env: Any) -> Any:
    """The carried step a learner runs for ``env``: ``env`` itself where its step is
    :meth:`BatchedEnv.advance_carried` (a :class:`BatchedEnv`, bare or under wrappers whose
    step is tensor math on it), else an adapter whose ``advance_carried`` calls
    ``env.step``.

    :param env: a batched env or wrapper.
    """
    return env if isinstance(env, Batched) and env._steps_by_advance else _AdvanceByStep(env)


class BatchedWrapper(Batched):
    """Base class of wrappers around a batched env.

    Unknown attributes and methods are looked up on the wrapped env, so a wrapper that only
    changes the reward overrides :meth:`step` and nothing else; the adapters
    (``rewardlab.envs.adapters``) adapt the wrapper itself, and wrappers stack in any order.

    Example::

        >>> class ScaleReward(BatchedWrapper):
        ...     def step(self, actions):
        ...         obs, reward, terminated, truncated, info = self.env.step(actions)
        ...         return obs, 0.1 * reward, terminated, truncated, info

    :param env: the batched env (or wrapper) to wrap
    """

    def __init__(self, env: BatchedEnv | BatchedWrapper):
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self) -> BatchedEnv:
        """The env at the bottom of the stack of wrappers."""
        return self.env.unwrapped

    @property
    def threads(self) -> int | None:
        """The wrapped env's :attr:`~rewardlab.common.threads.ThreadsSetting.threads`, which
        this wrapper's steps run at too (the default for an env of the contract that has
        no such setting)."""
        return getattr(self.env, "threads", DEFAULT_THREADS)

    @threads.setter
    def threads(self, threads: int | None) -> None:
        self.env.threads = threads

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset the wrapped env; see :meth:`BatchedEnv.reset`.

        :param seed: the seed, or ``None``
        :param options: the reset options, or ``None``
        """
        return self.env.reset(seed=seed, options=options)

    @property
    def carried_env(self) -> Any:
        """The wrapped env in :meth:`BatchedEnv.advance_carried`'s form
        (:func:`carried_steps` of it), made once: what a wrapper's own
        ``advance_carried`` steps."""
        carried = self.__dict__.get("_carried_env")
        if carried is None:
            carried = self.__dict__["_carried_env"] = carried_steps(self.env)
        return carried

    # A wrapper's carried step defaults to its wrapped env's carried form's: one that
    # carries nothing of its own writes only advance_carried (and component_names).

    def reset_states_ahead(self, steps: int) -> torch.Tensor:
        """:attr:`carried_env`'s (:meth:`BatchedEnv.reset_states_ahead`).

        :param steps: how many steps will follow, at least 1.
        """
        return self.carried_env.reset_states_ahead(steps)

    def carried(self) -> tuple[torch.Tensor, ...]:
        """:attr:`carried_env`'s (:meth:`BatchedEnv.carried`)."""
        return self.carried_env.carried()

    def carried_example(self) -> tuple[torch.Tensor, ...]:
        """:attr:`carried_env`'s (:meth:`BatchedEnv.carried_example`)."""
        return self.carried_env.carried_example()

    def commit_carried(
        self, carry: Sequence[torch.Tensor], done: torch.Tensor, actions: torch.Tensor
    ) -> None:
        """:attr:`carried_env`'s (:meth:`BatchedEnv.commit_carried`).

        :param carry: the last step's carry.
        :param done: bool ``(steps, num_envs)``, each step's ended episodes.
        :param actions: the last step's actions.
        """
        self.carried_env.commit_carried(carry, done, actions)

    def step(self, actions: Actions) -> StepReturn:
        """Step the wrapped env; see :meth:`BatchedEnv.step`. A wrapper that writes its own
        ``advance_carried`` (with ``carried``, ``commit_carried`` and ``component_names``,
        over :attr:`carried_env`) gets its step from it.

        :param actions: the batch of actions
        """
        if getattr(type(self), "advance_carried", None) is None:
            return self.env.step(actions)
        return _step_by_advance(self, actions)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"
