"""What ``compile=True`` adds to :class:`rewardlab.agents.PPO`, in one place.

PPO's code is written once, in ``agents/ppo.py``, and runs eagerly: the rollout's steps,
the critic and the minibatch step (the loss, ``loss.backward()``, ``clip_grad_norm_``,
``torch.optim.Adam``). With ``compile=True`` the same functions are traced into graphs of
aten operators (``make_fx``) and compiled ahead of time with AOTInductor, each library kept
in an on-disk cache (:mod:`rewardlab.common.compiled`, ``$REWARDLAB_CACHE``) under its
recipe, so that a process with the same network, shapes and settings loads it instead.

What the compiled path needs beyond tracing PPO's functions:

- :class:`CompiledUpdate`: the minibatch step's gradient clipping and Adam written out, so
  that they run inside the compiled graph rather than as dispatches of their own after it
  (``benchmarks/results/ppo_update_step.md``); tested step for step against
  ``clip_grad_norm_`` and ``torch.optim.Adam``;
- decompositions the graphs are traced with: a rational tanh, and matrix products
  arranged for MKL's fast cases;
- :class:`PPOCompiled`: which of a model's calls are compiled, for which shapes, under
  which recipe.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.fx.experimental import proxy_tensor

from rewardlab.common.compiled import load_or_compile, load_or_trace, source_fingerprint

# tanh(x) ~ x P(x^2) / Q(x^2) on [-9, 9], P of degree 6 and Q of degree 3 (Q(0) = 1): a
# least-squares fit of the relative error on [0, 9] in float64, the weights refitted by
# Q's last values until they settle (Sanathanan-Koerner), in the scaled variable x / 9.
# Evaluated in float32 its error is at most 3.3e-7 (torch.tanh's: 3.2e-8), tested in
# tests/agents/test_fused.py.
_TANH_P = (
    9.9999999716873644e-01,
    1.3092407381250853e-01,
    3.1133052017604129e-03,
    1.1251323300002215e-05,
    -2.0614676497983626e-08,
    5.4635017491679701e-11,
    -8.9608131207275814e-14,
)
_TANH_Q = (1.0, 4.6425737428469960e-01, 2.4532492304696046e-02, 2.5597124086908853e-04)


def _polynomial(s: torch.Tensor, coefficients: tuple[float, ...]) -> torch.Tensor:
    value = s * coefficients[-1] + coefficients[-2]
    for c in coefficients[-3::-1]:
        value = value * s + c
    return value


def _tanh(x: torch.Tensor) -> torch.Tensor:
    # tanh as a rational function: Inductor's vectorised tanh costs an exp and a division a
    # value, this a division and a few multiply-adds. Its gradient stays tanh's own
    # backward, 1 - tanh(x)^2, of this value; clamped to [-1, 1] so that stays >= 0.
    x = x.clamp(-9.0, 9.0)
    s = x * x
    return (x * _polynomial(s, _TANH_P) / _polynomial(s, _TANH_Q)).clamp(-1.0, 1.0)


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # A product with few output columns and many rows, such as the weight gradient of a
    # layer with 4 inputs, (64 x 512) @ (512 x 4), is MKL's slow case: compute the transpose.
    if b.shape[1] <= 8 < a.shape[0]:
        return torch.mm(b.t(), a.t()).t()
    return NotImplemented  # trace the product as it is


def _addmm(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta: float = 1, alpha: float = 1
) -> torch.Tensor:
    # A layer's bias + a @ b as a product and an add: MKL's addmm first copies the bias into
    # every row of its output (a pass over it), where the add can join the activation's
    # pass that follows; and the product of a layer with few outputs (a policy's logits)
    # takes _mm's transpose (the product below is traced through _mm).
    if beta != 1 or alpha != 1:
        return NotImplemented
    # subtracting the negated bias (the same sum, exactly): Inductor would fuse an add of a
    # product back into an addmm
    return torch.mm(a, b) - bias.neg()


_DECOMPOSITIONS = {
    torch.ops.aten.tanh.default: _tanh,
    torch.ops.aten.mm.default: _mm,
    torch.ops.aten.addmm.default: _addmm,
}


def _traced_source() -> str:
    # the code a recipe's graph is traced from: these packages' (the networks, PPO's loss,
    # this module's step) and rewardlab.common's
    return source_fingerprint("rewardlab.agents", "rewardlab.common")


def _traced(function: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> torch.fx.GraphModule:
    return proxy_tensor.make_fx(function, decomposition_table=_DECOMPOSITIONS)(*inputs)


#: a loss of a minibatch and the model's parameters by name: a tuple of 0-d tensors, the
#: loss to minimise first, the rest handed back (detached) with the step
LossFunction = Callable[[Sequence[torch.Tensor], dict[str, torch.Tensor]], Sequence[torch.Tensor]]


class CompiledUpdate:
    """A minibatch step compiled: the gradient of ``loss``, ``clip_grad_norm_`` and
    ``torch.optim.Adam``'s update, term for term, as one compiled call on flat buffers that
    the module's parameters and the optimiser's state are views of.

    Calling it computes the new parameters and Adam state without committing them;
    :meth:`commit` writes them into the module and the optimiser (so that a caller can look
    at the loss's terms, such as an approximate KL, and skip the step). The state is the
    optimiser's own (``exp_avg``, ``exp_avg_sq``, ``step``): a model saves, loads and
    continues with ``compile`` on or off, and ``optimizer.step()`` may step it between calls.

    :param module: the network; its parameters are the ones updated.
    :param optimizer: a ``torch.optim.Adam`` over exactly ``module.parameters()`` (one
        group, no weight decay, not amsgrad).
    :param loss: the loss of a minibatch and parameters (:data:`LossFunction`).
    :param max_grad_norm: clip of the global gradient norm (``math.inf``: none).
    :param example_batch: a minibatch of the shapes and dtypes the step takes (see :meth:`fits`).
    :param recipe: what ``module`` and ``loss`` are made from, beyond the source of
        ``rewardlab.agents`` and ``rewardlab.common``: given, a process that finds the same
        recipe in the cache loads its library untraced (:func:`load_or_trace`).
    """

    def __init__(
        self,
        module: nn.Module,
        optimizer: torch.optim.Adam,
        loss: LossFunction,
        max_grad_norm: float,
        example_batch: Sequence[torch.Tensor],
        recipe: str | None = None,
    ) -> None:
        self.names = [name for name, _ in module.named_parameters()]
        self.parameters = [p for _, p in module.named_parameters()]
        group = optimizer.param_groups[0]
        if (
            len(optimizer.param_groups) != 1
            or [id(p) for p in group["params"]] != [id(p) for p in self.parameters]
            or group.get("weight_decay", 0)
            or group.get("amsgrad", False)
        ):
            raise ValueError(
                "CompiledUpdate needs a torch.optim.Adam with one group over exactly the "
                "module's parameters, without weight decay or amsgrad"
            )
        self.optimizer = optimizer
        self.beta1, self.beta2 = group["betas"]
        self.eps = float(group["eps"])
        self.loss, self.max_grad_norm = loss, float(max_grad_norm)
        self.batch_shapes = [(tuple(t.shape), t.dtype) for t in example_batch]
        self.shapes = [p.shape for p in self.parameters]
        self.sizes = [p.numel() for p in self.parameters]
        self._bind()
        self._lr: tuple[float, torch.Tensor] | None = None  # the last learning rate, as a tensor
        device = self.parameters[0].device
        inputs = [*self._flat, torch.tensor(1.0, device=device), *example_batch]
        inputs = [t.detach().contiguous() for t in inputs]
        if recipe is None:
            self.compiled = load_or_compile(_traced(self._step, inputs), inputs, "ppo-update")
        else:
            shapes = list(zip(self.names, self.shapes, strict=True))
            recipe = repr((recipe, _traced_source(), shapes, self.beta1, self.beta2, self.eps,
                           self.max_grad_norm))  # fmt: skip
            self.compiled = load_or_trace(
                lambda: _traced(self._step, inputs), inputs, "ppo-update", recipe
            )

    def _bind(self) -> None:
        """Make the parameters and the Adam state views of four flat buffers.

        The step then takes and returns four tensors (parameters, ``exp_avg``,
        ``exp_avg_sq``, ``step``s) instead of four per parameter, and a commit is four
        copies: each tensor handed to a compiled library and back costs a conversion.
        The module and the optimiser see their usual tensors (views).
        """
        with torch.no_grad():
            params = torch.cat([p.detach().reshape(-1) for p in self.parameters])
            exp_avg, exp_avg_sq, steps = self._adam_state()
            avg = torch.cat([m.reshape(-1) for m in exp_avg])
            avg_sq = torch.cat([v.reshape(-1) for v in exp_avg_sq])
            step = torch.stack([t.reshape(()) for t in steps]).to(torch.float32)
            pieces = zip(
                params.split(self.sizes),
                avg.split(self.sizes),
                avg_sq.split(self.sizes),
                strict=True,
            )
            for i, (p, shape, (value, m, v)) in enumerate(
                zip(self.parameters, self.shapes, pieces, strict=True)
            ):
                p.data = value.view(shape)
                state = self.optimizer.state[p]
                state["exp_avg"], state["exp_avg_sq"], state["step"] = (
                    m.view(shape),
                    v.view(shape),
                    step[i],
                )
        self._flat = [params, avg, avg_sq, step]
        # what a rebinding is needed after: the optimiser's state replaced (load_state_dict)
        # or a parameter's storage (module.to, p.data = ...)
        self._bound = (self.optimizer.state, [p.data_ptr() for p in self.parameters])

    def _bound_still(self) -> bool:
        state, pointers = self._bound
        return self.optimizer.state is state and [p.data_ptr() for p in self.parameters] == pointers

    def _adam_state(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """``exp_avg``s, ``exp_avg_sq``s and ``step``s of the optimiser, made as
        ``torch.optim.Adam`` makes them if it has not stepped."""
        exp_avg, exp_avg_sq, steps = [], [], []
        for p in self.parameters:
            state = self.optimizer.state[p]
            if not state:
                state["step"] = torch.tensor(0.0, dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            exp_avg.append(state["exp_avg"])
            exp_avg_sq.append(state["exp_avg_sq"])
            steps.append(state["step"])
        return exp_avg, exp_avg_sq, steps

    def _step(
        self, params: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
        steps: torch.Tensor, lr: torch.Tensor, *batch: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        """The function traced: new parameters, new Adam state (flat), then the loss's terms
        as one vector (one tensor handed back, not one each)."""
        with torch.enable_grad():
            flat = params.detach().requires_grad_()
            values = [
                v.view(shape) for v, shape in zip(flat.split(self.sizes), self.shapes, strict=True)
            ]
            terms = self.loss(batch, dict(zip(self.names, values, strict=True)))
            (grad,) = torch.autograd.grad(terms[0], flat)
        terms = torch.stack(tuple(terms)).detach()
        # clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1
        norm = torch.linalg.vector_norm(grad)
        g = grad * (self.max_grad_norm / (norm + 1e-6)).clamp(max=1.0)
        # torch.optim.Adam's update, term for term, each parameter with its own step count
        t = steps + 1
        m = exp_avg + (g - exp_avg) * (1 - self.beta1)
        v = exp_avg_sq * self.beta2 + g * g * (1 - self.beta2)
        bias_correction1 = self._per_element(1 - self.beta1**t)
        bias_correction2 = self._per_element(1 - self.beta2**t)
        denom = v.sqrt() / bias_correction2.sqrt() + self.eps
        new_params = params - (lr / bias_correction1) * m / denom
        return (new_params, m, v, t, terms)

    def _per_element(self, per_parameter: torch.Tensor) -> torch.Tensor:
        """One value per parameter, ``(P,)``, spread over the flat buffer's elements."""
        return torch.cat([per_parameter[i].expand(n) for i, n in enumerate(self.sizes)])

    def __call__(
        self, batch: Sequence[torch.Tensor], learning_rate: float
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """The step on ``batch`` (which :meth:`fits`) at ``learning_rate``: ``(new_state,
        terms)``, ``terms`` the loss's terms as one vector; nothing committed.

        :param batch: the minibatch's tensors.
        :param learning_rate: Adam's step size for this step.
        """
        if not self._bound_still():
            self._bind()
        lr = self._lr_tensor(learning_rate)
        with torch.no_grad():
            out = self.compiled(*self._flat, lr, *(t.contiguous() for t in batch))
        return list(out[:4]), out[4]

    def _lr_tensor(self, learning_rate: float) -> torch.Tensor:
        """The learning rate as the 0-d tensor the step takes (made again only when it changes)."""
        if self._lr is None or self._lr[0] != learning_rate:
            self._lr = (
                learning_rate,
                torch.tensor(float(learning_rate), device=self.parameters[0].device),
            )
        return self._lr[1]

    def fits(self, batch: Sequence[torch.Tensor]) -> bool:
        """Whether ``batch`` has the shapes and dtypes this update was compiled for."""
        return [(tuple(t.shape), t.dtype) for t in batch] == self.batch_shapes

    def commit(self, new_state: list[torch.Tensor]) -> None:
        """Write a call's new parameters and Adam state into the module and the optimiser."""
        if not self._bound_still():
            self._bind()
        with torch.no_grad():
            torch._foreach_copy_(self._flat, new_state)


class CompiledCall:
    """``module(*args)`` as one compiled function of the module's parameters and ``args``.

    Traced once for the example's shapes with the parameters as inputs (so that updates
    to them are seen), compiled or loaded like :class:`CompiledUpdate`'s step; called
    without gradients. It returns the module's output tensors as a list.

    :param module: the module; its ``forward`` is what runs.
    :param example_args: tensors of the shapes and dtypes every call passes.
    :param name: the start of the compiled library's file name.
    :param recipe: as for :class:`CompiledUpdate`.
    """

    def __init__(
        self,
        module: nn.Module,
        example_args: Sequence[torch.Tensor],
        name: str,
        recipe: str | None = None,
    ) -> None:
        self.names = [n for n, _ in module.named_parameters()]
        self.parameters = [p for _, p in module.named_parameters()]
        count = len(self.names)

        def call(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
            parameters = dict(zip(self.names, flat[:count], strict=True))
            out = torch.func.functional_call(module, parameters, tuple(flat[count:]))
            return out if isinstance(out, tuple) else (out,)

        # compiled for contiguous inputs; calls pass theirs contiguous (a no-op when they are)
        inputs = [t.detach().contiguous() for t in (*self.parameters, *example_args)]

        def trace() -> torch.fx.GraphModule:
            with torch.no_grad():
                return _traced(call, inputs)

        if recipe is None:
            self.compiled = load_or_compile(trace(), inputs, name)
        else:
            recipe = repr((recipe, _traced_source(), self.names, type(module).__qualname__))
            self.compiled = load_or_trace(trace, inputs, name, recipe)

    def __call__(self, *args: torch.Tensor) -> list[torch.Tensor]:
        with torch.no_grad():
            return list(self.compiled(*self.parameters, *(a.contiguous() for a in args)))


class PPOCompiled:
    """The compiled calls of one PPO model and env (``compile=True``), each made at its
    first use: ``"update"``, the minibatch step; ``"rollout"``, the rollout's steps with the
    env's step inside; ``"act"``, the policy's step alone, for an env whose step does not
    trace; ``"score"``, the critic on a rollout's observations.

    :param policy: the model's :class:`rewardlab.agents.networks.ActorCritic`.
    :param optimizer: the ``torch.optim.Adam`` of its parameters.
    :param recipe: what the graphs are made of besides rewardlab's code (the network, the
        spaces, the settings), asked at each compile: a process that finds the same recipe
        in the cache loads the libraries without tracing the graphs again.
    """

    def __init__(
        self, policy: nn.Module, optimizer: torch.optim.Adam, recipe: Callable[[], str]
    ) -> None:
        self.policy, self.optimizer, self.recipe = policy, optimizer, recipe
        self.calls: dict[str, Any] = {}

    def update(
        self, batch: Sequence[torch.Tensor], loss: LossFunction, max_grad_norm: float
    ) -> CompiledUpdate | None:
        """The minibatch step of ``loss`` compiled for the first ``batch``'s shapes (or
        loaded); None for a batch of other shapes (a shorter last minibatch), which the
        caller steps eagerly."""
        if "update" not in self.calls:
            self.calls["update"] = CompiledUpdate(
                self.policy, self.optimizer, loss, max_grad_norm, batch, self.recipe()
            )
        update = self.calls["update"]
        return update if update.fits(batch) else None

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """The critic's ``(B, H)`` values of normalised observations, compiled for ``obs``'s
        shape."""
        return self._compiled("score", lambda: self.policy.critic, (obs,))(obs)[0]

    def rollout_steps(
        self, make_steps: Callable[[Any, Any], nn.Module], sampler: nn.Module, env: Any,
        example: Sequence[torch.Tensor], env_traces: bool,
    ) -> Callable[..., Sequence[torch.Tensor]]:  # fmt: skip
        """The rollout's steps compiled with the env's step inside where it traces; else the
        same steps run eagerly around the policy's step compiled (with a warning where the
        env's step was expected to compile but did not).

        :param make_steps: makes the rollout's steps of a policy's step and an env's steps.
        :param sampler: the policy's step.
        :param env: the env's carried steps.
        :param example: the policy step's inputs ``(obs, noise, mean, inv_std)``, one step's,
            then a recurrent policy's memory (which the rollout's steps carry before the env's).
        :param env_traces: whether ``env``'s step is known to trace.
        """
        if env_traces and "rollout" not in self.calls:
            try:
                self._compile_rollout_steps(make_steps(sampler, env), env, example)
            except Exception as error:  # the env's step does not trace or compile
                self.calls["rollout"] = None
                warnings.warn(
                    f"{env}'s step could not be compiled into PPO's rollout "
                    f"({type(error).__name__}: {str(error)[:300]}); the rollout steps the env "
                    "eagerly, between compiled steps of the policy",
                    stacklevel=4,
                )
        if self.calls.get("rollout") is not None:
            return self.calls["rollout"]
        return make_steps(self._compiled("act", lambda: sampler, example), env)

    def _compile_rollout_steps(
        self, module: Any, env: Any, example: Sequence[torch.Tensor]
    ) -> None:
        """Compile the rollout's steps with the env's step inside; the recipe that names the
        graph holds the env's (:meth:`BatchedEnv.step_fingerprint`) besides the model's."""
        obs, noise, *whitening_and_memory = example
        # examples of the inputs' shapes and dtypes (the env may not be reset yet): the
        # reset states (the state's rows, one column an env) and noise of every step
        carry = env.carried_example()
        fresh = carry[0].repeat(1, module.steps)
        noise = noise.expand(module.steps, *noise.shape)
        recipe = repr((self.recipe(), module.steps, env.step_fingerprint()))
        inputs = (obs, fresh, noise, *whitening_and_memory, *carry)
        with env.traced_steps():
            self._compiled("rollout", lambda: module, inputs, recipe)

    def _compiled(
        self, name: str, build: Callable[[], nn.Module], example: Sequence[torch.Tensor],
        recipe: str | None = None,
    ) -> Any:  # fmt: skip
        """The module ``build()`` makes, compiled for ``example``'s shapes, once; ``recipe``
        names what it is made of (default: :attr:`recipe`'s)."""
        if name not in self.calls:
            recipe = recipe or self.recipe()
            self.calls[name] = CompiledCall(build(), example, f"ppo-{name}", recipe)
        return self.calls[name]
