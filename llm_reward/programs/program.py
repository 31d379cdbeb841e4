"""Running a reward program: :class:`RewardFunction` loads one and calls it on batches.

A reward program is Python source defining ``compute_reward`` (or exactly one top-level
function under another name) that takes named batched tensors as keyword arguments (a
subset of ``describe(env_id).variables``) and returns ``(reward, components)``: a float
tensor ``(N,)`` and a dict of named float ``(N,)`` tensors, as in Eureka. A bare tensor
return (Text2Reward style) counts as one component named ``"reward"``. It is found in an
answer by :mod:`~rewardlab.llm_reward.programs.answers`, checked as a
:class:`~rewardlab.llm_reward.programs.source.RewardProgram`, run in the namespace of
:mod:`~rewardlab.llm_reward.programs.namespace`, and what it returns is checked by
:mod:`~rewardlab.llm_reward.programs.outputs`; this module also exports the names the
training and the search take from those.

Example::

    >>> from rewardlab import llm_reward
    >>> program = llm_reward.RewardProgram.from_llm_answer('''
    ... Here is a dense reward:
    ... ```python
    ... def compute_reward(theta, next_theta):
    ...     upright = 1.0 - (next_theta / 0.21) ** 2
    ...     return upright, {"upright": upright}
    ... ```''')
    >>> program.parameters
    ('theta', 'next_theta')
    >>> program.check("CartPole-v1")

Loading (:class:`RewardFunction`) executes the program, so it belongs inside the sandbox
(:func:`rewardlab.llm_reward.evaluate` does that); load a program in-process only when you
trust it.
"""

from __future__ import annotations
import __future__

import ast
import linecache
import math
import re
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from rewardlab.envs.descriptions import EnvDescription
from rewardlab.llm_reward.programs.answers import (
    FoundCode,
    code_choice_note,
    extract_code,
    find_code,
)
from rewardlab.llm_reward.programs.checks import PROGRAM_FILENAME
from rewardlab.llm_reward.programs.components import (
    BARE_COMPONENT,
    COMPONENT_NAME,
    COMPONENT_PREFIX,
    MAX_COMPONENT_TAG_CHARS,
    MAX_COMPONENTS,
    plain_component_name,
)
from rewardlab.llm_reward.programs.errors import (
    MAX_MESSAGE_CHARS,
    ProgramError,
    describe_exception,
    program_traceback,
)
from rewardlab.llm_reward.programs.namespace import restricted_builtins
from rewardlab.llm_reward.programs.outputs import (
    COMPONENT_IN_REASON,
    MAX_MAGNITUDE,
    REDUCE_LAST,
    as_float,
    check_output,
    is_number,
    is_scalar,
    program_sites,
    split_result,
)
from rewardlab.llm_reward.programs.source import RewardProgram

__all__ = [
    "COMPONENT_NAME", "COMPONENT_PREFIX", "MAX_COMPONENTS", "MAX_MAGNITUDE", "MAX_MESSAGE_CHARS",
    "FoundCode", "ProgramError", "RewardFunction", "RewardProgram", "code_choice_note",
    "extract_code", "find_code", "plain_component_name", "program_traceback",
]

# Errors of code written for one state at a time, run on a batch: the program is then run
# once per env (per-state mode).
_PER_STATE_ERRORS = (
    "Boolean value of Tensor with more than one",
    "only one element tensors can be converted",
    "a Tensor with",  # "a Tensor with N elements cannot be converted to Scalar"
    "must be real number, not Tensor",
)


def _per_state_line(error: Exception, num_envs: int) -> str:
    """``"line N: `code` needs one value, not a batch of num_envs"`` for the program's frame."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if frame.filename == PROGRAM_FILENAME]
    if not frames:
        return ""
    frame = frames[-1]
    code = (frame.line or "").strip()
    return (f"line {frame.lineno}: `{code}` needs one value, and each argument holds {num_envs} "
            "(one per env)")


# numpy's reductions call the tensor's method with numpy's keywords (axis=, out=, ddof=)
_NUMPY_ON_TENSOR = re.compile(
    r"unexpected keyword argument 'axis'|'dim' must be int, not NoneType"
    r"|invalid combination of arguments.*axis"
)


def _hint(error: Exception) -> str:
    """How to fix an error whose message alone does not say it (empty for others)."""
    if isinstance(error, TypeError) and _NUMPY_ON_TENSOR.search(str(error)):
        return (" (a numpy reduction such as np.sum, np.mean, np.max or np.std was given a torch "
                "tensor: every input is a torch tensor, so use torch's own over the last dimension "
                "of (N, k) values, e.g. x.sum(dim=-1), x.amax(dim=-1), "
                "torch.linalg.norm(x, dim=-1); an (N,) value is already one number per env: "
                "reduce nothing)")
    return ""


def _per_state_error(error: Exception) -> bool:
    return isinstance(error, RuntimeError | TypeError | ValueError) and any(
        text in str(error) for text in _PER_STATE_ERRORS
    )


def _both(first: ProgramError, then: ProgramError, how: str) -> ProgramError:
    """One failure out of two ways of calling the program that both failed: the first one's
    reason and traceback, then the second's, so that neither cause is lost."""
    if first.kind == "sandbox" or then.kind == "sandbox":
        return first if first.kind == "sandbox" else then
    same_line = first.traceback.splitlines()[-2:] == then.traceback.splitlines()[-2:]
    if first.traceback.strip() and same_line:
        return first  # the same error at the same line: once is enough
    reason = f"{first.reason}\n{how}, it failed too: {then.reason}"
    traceback_text = "\n".join(text for text in (first.traceback, then.traceback) if text.strip())
    kind = first.kind if first.kind != "program" else then.kind
    return ProgramError(reason, traceback_text, kind)


class RewardFunction:
    """A reward program loaded into a restricted namespace and applied to batched transitions.

    Calling it builds the named inputs (each a tensor of the program's own), calls the
    program under ``torch.no_grad()`` and checks what it returns: a float tensor ``(N,)``
    and a dict of at most 32 named float ``(N,)`` tensors, all finite.
    Anything wrong raises :class:`ProgramError`.

    Executes the program: inside the sandbox, or in-process only for trusted programs.

    :param program: the program.
    :param description: the env's description (names to tensors).
    :param check: called after every call of the program; a string it returns fails the
        call with that reason (the sandbox reports its guard's violations this way, since a
        program may catch the exception the guard raised).
    :raises ProgramError: running the program's top level failed or its function is missing.
    """

    def __init__(
        self,
        program: RewardProgram,
        description: EnvDescription,
        check: Callable[[], str | None] | None = None,
    ):
        self.program = program
        self.description = description
        self.calls = 0
        self._check = check
        linecache.cache[PROGRAM_FILENAME] = (
            len(program.source), None, program.source.splitlines(True), PROGRAM_FILENAME
        )
        namespace: dict[str, Any] = {
            "__builtins__": restricted_builtins(),
            "__name__": "reward_program",
            "math": math,
            "np": np,
            "numpy": np,
            "torch": torch,
        }
        try:
            code = compile(
                program.source, PROGRAM_FILENAME, "exec",
                flags=__future__.annotations.compiler_flag, dont_inherit=True,
            )
            exec(code, namespace)
        except Exception as error:
            raise self._failure(error, "running the program's top level") from None
        self._raise_if_check_fails()
        function = namespace.get(program.function_name)
        if not callable(function):
            raise ProgramError(f"the program does not define a function `{program.function_name}`")
        self._function: Callable[..., Any] = function
        # the one parse of the source
        self._sites = program_sites(program.source, program.function_name)
        #: ``"line N: "`` of the reward function's last ``return`` for messages, ``""`` if none
        self._line = f"line {self._sites.returns}: " if self._sites.returns else ""
        #: True once the program showed it is written for one state at a time: it is then
        #: run per env, with ``torch.vmap`` where it traces (pure torch code: one call for the
        #: batch), in a Python loop otherwise (one call of the program per env).
        self.per_state = False
        #: how per-state code runs: "vmap" or "loop" (decided on the first per-state call)
        self.per_state_mode = ""
        #: the line and the reason it showed it, for the note the model reads
        self.per_state_reason = ""
        # whether the first batched result was compared with the halves' (_check_independence)
        self._independence_checked = False
        # for a batch of one env: "state" (called with its values, as for one state) or
        # "batch" (with the batch of one, where that failed); "" before the first such call
        self._one_env_mode = ""

    def __call__(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
        env_reward: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The program's reward and components for one batched step.

        :param obs: observations before the step ``(N, *obs_shape)``.
        :param action: the actions ``(N,)`` or ``(N, *shape)``.
        :param next_obs: observations after it (true last ones where episodes ended).
        :param terminated: bool ``(N,)``.
        :param env_reward: the env's own reward for the step ``(N,)``, for a program that
            takes ``env_reward``.
        :return: ``(reward, components)``, float32 on ``obs.device``.
        :raises ProgramError: the program raised or returned something malformed or non-finite.
        """
        self.calls += 1
        num_envs = len(obs)
        raw = self.description.reward_inputs(
            obs, action, next_obs, terminated, self.program.inputs(self.description), env_reward
        )
        # Every input is a tensor of the program's own: changing it in place (``r -= c``,
        # ``x[mask] = 0``) touches nothing else, so it is allowed.
        inputs = {name: value.clone() for name, value in raw.items()}
        steps = (self.calls - 1) * num_envs
        where = f"`{self.program.function_name}` (call {self.calls}, after {steps} env steps)"
        if num_envs == 1 and self._one_env_mode != "batch":
            # One env (a Gymnasium env wrapped): the program gets that env's values, as code
            # written for one state expects them (numpy on a list of the inputs, float(),
            # `if`); code written for a batch mostly runs on them too, and where it does not
            # (x[:, 0], len(x)) it gets the batch of one instead, from then on.
            try:
                result = self._per_state_call(inputs, 1, obs.device, where)
            except ProgramError as error:
                if error.kind == "sandbox" or self._one_env_mode == "state":
                    raise
                self._one_env_mode = "batch"
                # as the failed call left them
                inputs = {name: value.clone() for name, value in raw.items()}
                try:
                    return self._batched_call(inputs, raw, num_envs, obs.device, where)
                except ProgramError as batch_error:
                    # both ways failed: the first is the cause for code written for one state
                    how = "called with the env's values as a batch of one"
                    raise _both(error, batch_error, how) from None
            else:
                self._one_env_mode = "state"
                return result
        return self._batched_call(inputs, raw, num_envs, obs.device, where)

    def _batched_call(
        self, inputs: dict[str, torch.Tensor], raw: Mapping[str, torch.Tensor], num_envs: int,
        device: torch.device, where: str,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The program called on the batch, or per env once it showed it is written for one
        state."""
        if not self.per_state:
            try:
                with torch.no_grad():
                    result = self._function(**inputs)
            except Exception as error:
                # code for one state fails on a batch: with Python control flow on values
                # (`if x > 0`, float(x)) or with shapes of one state (torch.dot, stacking,
                # np.array of the inputs), and runs for one env's values
                mapped = self._vmapped_call(inputs, num_envs, device)
                if mapped is None and not _per_state_error(error):
                    if num_envs == 1:  # __call__ tried its values as one state first
                        raise self._failure(error, where) from None
                    one_env_error = self._one_env_error(raw)
                    if one_env_error is not None:
                        how = "called with env 0's values alone"
                        raise _both(self._failure(error, where), one_env_error, how) from None
                self.per_state = True  # written for one state: run it per env from now on
                self.per_state_reason = _per_state_line(error, num_envs)
                if mapped is not None:
                    self.per_state_mode = "vmap"
                    return mapped
            else:
                if not (num_envs > 1 and is_scalar(split_result(result)[0])):
                    self._raise_if_check_fails()
                    checked = self._checked_result(result, num_envs, device)
                    if not self._independence_checked and num_envs > 1:
                        self._independence_checked = True
                        self._check_independence(raw, checked, where)
                    return checked
                self.per_state = True
                self.per_state_reason = (f"{self._line}it returns one number for a batch of "
                                         f"{num_envs} envs (Python arithmetic on scalars)")
        if self.per_state_mode == "vmap":
            mapped = self._vmapped_call(inputs, num_envs, device)
            if mapped is not None:
                return mapped
        self.per_state_mode = "loop"  # Python control flow on values: vmap cannot trace it
        return self._per_state_call(inputs, num_envs, device, where)

    def _one_env_error(self, raw: Mapping[str, torch.Tensor]) -> ProgramError | None:
        """None when the program, called with env 0's values alone, returns a reward (and
        components) of one number each (code written for one state), else why it does not."""
        try:
            with torch.no_grad():
                first = {name: value[0].clone() for name, value in raw.items()}
                self._one_state(self._function(**first))
        except ProgramError as error:
            self._raise_if_check_fails()
            return error
        except Exception as error:
            return self._failure(error, f"`{self.program.function_name}`")
        self._raise_if_check_fails()
        return None

    def _check_independence(
        self,
        raw: Mapping[str, torch.Tensor],
        whole: tuple[torch.Tensor, dict[str, torch.Tensor]],
        where: str,
    ) -> None:
        """Call the program on each half of the batch and compare with the whole batch's
        result: an env's reward must not depend on the other envs (code written for one
        state that numpy or a reduction turned into one over the batch).

        :raises ProgramError: a half's values differ, or the program fails on a half.
        """
        num_envs, device = len(whole[0]), whole[0].device
        half = num_envs // 2
        for start, stop in ((0, half), (half, num_envs)):
            part = {name: value[start:stop].clone() for name, value in raw.items()}
            called = f"{where}, called on envs {start} to {stop - 1} alone"
            try:
                with torch.no_grad():
                    result = self._function(**part)
            except Exception as error:
                raise self._failure(error, called) from None
            self._raise_if_check_fails()
            try:
                reward, components = self._checked_result(result, stop - start, device)
            except ProgramError as error:
                raise ProgramError(f"{called}: {error.reason}; a reward program must work for any "
                                   "number of envs") from None
            if set(components) != set(whole[1]):
                raise ProgramError(f"{called}, returned the components {sorted(components)}, and "
                                   f"on all {num_envs} envs {sorted(whole[1])}: the components "
                                   "must not depend on the batch")
            pairs = [("the reward", reward, whole[0]),
                     *((f"component {name!r}", value, whole[1][name])
                       for name, value in components.items())]
            for what, alone, together in pairs:
                together = together[start:stop]
                tolerance = 1e-4 * together.abs() + 1e-5 * (1 + float(together.abs().max()))
                close = (alone - together).abs() <= tolerance
                if not bool(close.all()):
                    env = start + int((~close).nonzero()[0, 0])
                    in_batch, on_own = float(together[env - start]), float(alone[env - start])
                    raise ProgramError(
                        f"{self._line}the reward of one env depends on the other envs in the "
                        f"batch: {what} of env {env} is {in_batch:.6g} in the batch of {num_envs} "
                        f"envs and {on_own:.6g} when `{self.program.function_name}` is called on "
                        f"envs {start} to {stop - 1} alone. Every input holds one value per env "
                        "(shape (N,), or (N, k) for vector variables), so a reduction over all of "
                        "it mixes the envs: np.linalg.norm([a, b]), np.array([...]), "
                        "np.sum/np.max/np.mean without axis, .sum(), .mean() or .max() without "
                        "dim, torch.sum(x, dim=-1) on an (N,) input such as a one-dimensional "
                        "action, or a batch statistic (x / x.max(), x - x.mean()). Compute each "
                        "env's value from its own inputs: torch.sqrt(a ** 2 + b ** 2) for a norm, "
                        "reductions over dim=-1 of vector variables only (a reward that draws "
                        "random numbers differs between calls too: make it deterministic)"
                    )

    def _vmapped_call(
        self, inputs: Mapping[str, torch.Tensor], num_envs: int, device: torch.device
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        """The per-state program mapped over the batch by ``torch.vmap``; None where it cannot
        be."""
        names = list(inputs)

        def one_state(*values: torch.Tensor) -> Any:
            return self._function(**dict(zip(names, values, strict=True)))

        try:
            with torch.no_grad():
                result = torch.vmap(one_state)(*inputs.values())
            checked = self._checked_result(result, num_envs, device)
        except Exception:  # `if`, float(), .item(), Python numbers: the loop runs it instead
            return None
        self._raise_if_check_fails()
        return checked

    def _per_state_call(
        self, inputs: Mapping[str, torch.Tensor], num_envs: int, device: torch.device, where: str
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Call the program once per env with that env's values and stack what it returns."""
        rewards: list[float] = []
        per_env: list[dict[str, float]] = []
        for index in range(num_envs):
            single = {name: value[index] for name, value in inputs.items()}
            try:
                with torch.no_grad():
                    result = self._function(**single)
            except Exception as error:
                raise self._failure(error, f"{where}, called for env {index} on its own") from None
            reward, parts = self._one_state(result)
            rewards.append(reward)
            per_env.append(parts)
        self._raise_if_check_fails()
        # a component one branch leaves out (``if terminated: return -1.0, {"done": -1.0}``)
        # is 0 there
        names = list(dict.fromkeys(name for parts in per_env for name in parts))
        named = {name: torch.tensor([parts.get(name, 0.0) for parts in per_env]) for name in names}
        stacked = torch.tensor(rewards, dtype=torch.float32)
        return self._checked_result((stacked, named) if named else stacked, num_envs, device)

    def _one_state(self, result: Any) -> tuple[float, dict[str, float]]:
        """What a call with one env's values returned, as the reward and named components of
        one number each.

        :raises ProgramError: it is not ``(number, {name: number})`` or a bare number.
        """
        reward, parts = split_result(result)
        parts = {} if parts is None else parts
        if not isinstance(parts, dict):
            raise ProgramError(f"{self._line}`{self.program.function_name}` must return "
                               "(reward, components)")
        return (as_float(reward, f"{self._line}the reward returned for one env"),
                {str(key): as_float(value, f"{self._line}component {key!r}")
                 for key, value in parts.items()})

    def _raise_if_check_fails(self) -> None:
        reason = self._check() if self._check is not None else None
        if reason:
            raise ProgramError(reason, kind="sandbox")

    def _failure(self, error: Exception, where: str) -> ProgramError:
        """The :class:`ProgramError` for an exception raised while running ``where``."""
        self._raise_if_check_fails()
        described = describe_exception(error)
        if isinstance(error, MemoryError) or (
            isinstance(error, RuntimeError) and "can't allocate memory" in str(error)
        ):
            return ProgramError(
                f"{where} ran out of memory ({described}); the sandbox limits its memory, so "
                "use smaller tensors",
                program_traceback(error),
                kind="limit",
            )
        return ProgramError(f"{where} raised {described}{_hint(error)}", program_traceback(error))

    def _checked_result(
        self, result: Any, num_envs: int, device: torch.device
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`_check_result`, whose failure quotes the lines that computed the values it
        names (in a search the next prompt shows only the best program, not this one), and
        whose advice fits what the program did."""
        try:
            return self._check_result(result, num_envs, device)
        except ProgramError as error:
            reason, sites = error.reason, self._sites
            numbers: list[int] = []
            for match in COMPONENT_IN_REASON.finditer(reason):
                try:
                    named = ast.literal_eval(match.group(1))
                    numbers += sites.components.get(named, (sites.returns,))
                except (ValueError, SyntaxError):
                    numbers.append(sites.returns)
            if "the reward" in reason or not numbers:
                numbers += sites.reward or (sites.returns,)
            if REDUCE_LAST in reason and sites.stacks_first:
                # "reduce over dim=-1" would be the mistake itself: the stack put the envs there
                numbers.append(sites.stacks_first)
                reason = reason.replace(REDUCE_LAST, (
                    f"line {sites.stacks_first} stacks values on dim 0, which puts the envs on the "
                    "last dimension, so a reduction over dim=-1 mixes the envs; stack on the last "
                    "dimension instead (torch.stack([...], dim=-1), np.stack([...], axis=-1)) and "
                    "then reduce over dim=-1"))
            raise ProgramError(reason + sites.quote(numbers), error.traceback, error.kind) from None

    def _check_result(
        self, result: Any, num_envs: int, device: torch.device
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        name = self.program.function_name
        line = self._line
        returned = f"the reward returned by `{name}`"
        if isinstance(result, torch.Tensor | np.ndarray) or (num_envs == 1 and is_number(result)):
            reward = check_output(result, returned, num_envs, device, line)
            components = {BARE_COMPONENT: reward}
        elif isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            reward = check_output(result[0], returned, num_envs, device, line)
            if len(result[1]) > MAX_COMPONENTS:
                raise ProgramError(
                    f"`{name}` returned {len(result[1])} components; at most {MAX_COMPONENTS} "
                    "are allowed"
                )
            components = {}
            for key, value in result[1].items():
                if not isinstance(key, str) or not 0 < len(key) <= MAX_COMPONENT_TAG_CHARS:
                    raise ProgramError(
                        f"component names must be strings of 1 to {MAX_COMPONENT_TAG_CHARS} "
                        f"characters; got {key!r:.80}"
                    )
                plain = plain_component_name(key)
                if plain in components:
                    raise ProgramError(f"the component names {key!r:.80} and another both become "
                                       f"{plain!r} (component names are identifiers); give them "
                                       "names that differ in their letters and digits")
                what = f"component {key!r}"
                components[plain] = check_output(value, what, num_envs, device, line)
        else:
            raise ProgramError(
                f"`{name}` returned a {type(result).__name__}; it must return (reward, "
                f"components): a tensor ({num_envs},) and a dict of named tensors ({num_envs},)"
            )
        stacked = torch.stack([reward, *components.values()])
        if not bool(torch.isfinite(stacked).all()):
            raise ProgramError(line + self._non_finite_reason(reward, components))
        largest = float(stacked.abs().max()) if stacked.numel() else 0.0
        if largest > MAX_MAGNITUDE:
            raise ProgramError(
                f"{line}`{name}` returned a value of magnitude {largest:.3g} at call {self.calls}; "
                f"rewards and components must stay within +-{MAX_MAGNITUDE:.0e} (sums over "
                "episodes and batches overflow float32 past that): scale them down"
            )
        return reward, components

    def _non_finite_reason(
        self, reward: torch.Tensor, components: Mapping[str, torch.Tensor]
    ) -> str:
        parts = []
        named = (("the reward", reward), *((f"component {k!r}", v) for k, v in components.items()))
        for what, value in named:
            nan = int(torch.isnan(value).sum())
            inf = int(torch.isinf(value).sum())
            if nan or inf:
                parts.append(f"{what}: {nan} NaN and {inf} inf of {len(value)}")
        return (
            f"`{self.program.function_name}` returned non-finite values at call {self.calls} "
            f"({'; '.join(parts)}); guard divisions, logs and exponentials (e.g. clamp the "
            "denominator or the argument)"
        )
