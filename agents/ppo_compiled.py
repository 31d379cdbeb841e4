"""What ``compile=True`` adds to :class:`rewardlab.agents.PPO`: its rollout steps and the
critic's scoring compiled (or loaded from the cache) at first use, and a warm-up that does
it ahead. The code compiled is PPO's own (the rollout's steps, the critic, the minibatch
step); this module only decides what to compile, for which shapes, under which recipe."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from rewardlab.agents.fused import CompiledCall


class PPOCompilation:
    """The compiled calls of a PPO model, by name (``"rollout"``: the rollout's steps with
    the env's inside; ``"act"``: the policy's step alone, for an env whose step does not
    trace; ``"score"``: the critic on a rollout's observations), made once per model and env.

    A mixin of :class:`rewardlab.agents.PPO`, which provides the attributes it reads.
    """

    config: Any
    env: Any
    policy: Any
    _compiled_calls: dict[str, Any]

    def warm_up(self) -> float:
        """Compile the minibatch update, the rollout's steps and the values now (or load
        them from the cache), so that the first ``learn`` does not pay for it; nothing is
        trained and no random number drawn. A no-op without ``compile``.

        :return: the seconds it took.
        """
        if self.env is None:
            raise ValueError("this model has no env: pass env= to PPO.load or call set_env(env)")
        start = time.perf_counter()
        if self.config.compile and self._fused is None:
            # the rollout's own buffers as examples: only their shapes and dtypes matter
            rollout, size = self._rollout, self.n_steps * self.env.num_envs
            obs = rollout.obs.reshape(size, *rollout.obs.shape[2:])
            actions = rollout.actions.reshape(size, *rollout.actions.shape[2:])
            rows = self.config.batch_size or max(size // 4, 1)
            vector = torch.zeros(size, device=self.device)
            per_head = torch.zeros((size, len(self.heads)), device=self.device)
            idx = torch.arange(rows, device=self.device)
            self._update_step((obs, actions, vector, vector, per_head, per_head, idx))
            self._rollout_steps()
            self._values(torch.zeros((size + self.env.num_envs, *obs.shape[1:]), device=self.device))
        return time.perf_counter() - start

    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)`` per head, ``(B, H)``, of normalised observations; with ``compile``, the
        critic compiled for the rollout's ``(n_steps + 1) * num_envs`` rows (other batches,
        the few truncated steps', run eagerly)."""
        rows = (self.n_steps + 1) * self.env.num_envs
        with torch.no_grad():
            if not self.config.compile or obs.shape[0] != rows:
                return self.policy.value(obs)
            return self._compiled("score", lambda: self.policy.critic, (obs,))(obs)[0]

    def _compiled_rollout_steps(self) -> Callable[..., Sequence[torch.Tensor]]:
        """The rollout's steps compiled with the env's step inside where it traces; else the
        same steps run eagerly around the policy's step compiled (with a warning where the
        env's step was expected to compile but did not)."""
        if self._env_steps_compile and "rollout" not in self._compiled_calls:
            try:
                self._compile_rollout_steps()
            except Exception as error:  # the env's step does not trace or compile
                self._compiled_calls["rollout"] = None
                warnings.warn(
                    f"{self.env}'s step could not be compiled into PPO's rollout "
                    f"({type(error).__name__}: {str(error)[:300]}); the rollout steps the env "
                    "eagerly, between compiled steps of the policy",
                    stacklevel=4,
                )
        if self._compiled_calls.get("rollout") is not None:
            return self._compiled_calls["rollout"]
        rms, sampler = self.obs_rms, self._sampler()
        noise = torch.ones(self._noise_shape(), device=self.device)
        act = self._compiled("act", lambda: sampler, (self._rollout.obs[0], noise, rms._mean32, rms._inv_std32))
        return self._make_rollout_steps(act, self._env_steps)

    def _compile_rollout_steps(self) -> None:
        """Compile the rollout's steps with the env's step inside; the recipe that names the
        graph holds the env's (:meth:`BatchedEnv.step_fingerprint`) besides the model's."""
        env = self.env
        module = self._make_rollout_steps(self._sampler(), env)
        # examples of the inputs' shapes and dtypes (the env may not be reset yet)
        carry = env.carried_example()
        fresh = carry[0].repeat(1, module.steps)  # reset states: the state's rows, one column an env
        rms = self.obs_rms
        noise = torch.ones((module.steps, *self._noise_shape()), device=self.device)
        example = (self._rollout.obs[0], fresh, noise, rms._mean32, rms._inv_std32, *carry)
        recipe = repr((self._recipe(), module.steps, env.step_fingerprint()))
        with env.traced_steps():
            self._compiled("rollout", lambda: module, example, recipe)

    def _compiled(
        self, name: str, build: Callable[[], nn.Module], example: Sequence[torch.Tensor], recipe: str | None = None
    ) -> Any:
        """The module ``build()`` makes, compiled for ``example``'s shapes, once per model and
        env; ``recipe`` names what it is made of (default: :meth:`_recipe`)."""
        if name not in self._compiled_calls:
            self._compiled_calls[name] = CompiledCall(build(), example, f"ppo-{name}", recipe or self._recipe())
        return self._compiled_calls[name]

    def _recipe(self) -> str:
        """What the compiled graphs are made of besides rewardlab's code: the network's
        structure, the spaces and the settings (a process that finds them in the cache
        loads the libraries without tracing the graphs again)."""
        return repr((
            type(self).__name__, repr(self.policy), repr(self.observation_space),
            repr(self.action_space), sorted(self.config.to_dict().items()),
        ))  # fmt: skip
