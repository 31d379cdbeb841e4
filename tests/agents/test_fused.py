"""PPO's compiled minibatch update (``compile=True``) against the eager one."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from rewardlab import envs
from rewardlab.agents import PPO
from rewardlab.agents.fused import CompiledUpdate, PPOCompiled
from rewardlab.common.compiled import CACHE_VARIABLE, cache_folder
from rewardlab.envs.classic.cartpole import CartPoleEnv

# Small networks and rollouts, and one set of settings wherever a test does not need its
# own: each distinct graph compiles once per test session (tens of seconds each on a machine
# whose compile caches are empty), and the tests below share every graph they can. The
# settings take the loss's every term: an entropy bonus, clipped values, annealing; 128-row
# rollouts in minibatches of 48, 48 and 32 (the shorter last one runs eagerly).
SMALL = dict(
    n_steps=16, batch_size=48, n_epochs=2, net_arch=[16], learning_rate=3e-3, ent_coef=0.01,
    clip_range_vf=0.2, anneal_lr=True,
)  # fmt: skip
# A time limit that random policies reach, so that rollouts hold truncated episodes.
TIME_LIMIT = 10


@pytest.fixture(scope="module")
def cache() -> Path:
    """The session's compile cache (``tests/conftest.py``): the libraries compiled here serve
    the other test modules' models of the same recipe, and theirs serve these."""
    assert os.environ[CACHE_VARIABLE]
    return cache_folder().parent


def _pair(env_id: str, **changes: Any) -> tuple[PPO, PPO]:
    made = []
    for compile in (False, True):
        env = envs.make(env_id, num_envs=8, seed=3, max_episode_steps=TIME_LIMIT)
        made.append(PPO(env, seed=3, compile=compile, **{**SMALL, **changes}))
    return made[0], made[1]


def _assert_same_state(eager: PPO, compiled: PPO) -> None:
    for (name, a), b in zip(eager.policy.named_parameters(), compiled.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}")
    for a, b in zip(eager._parameters, compiled._parameters, strict=True):
        state_a, state_b = eager.optimizer.state[a], compiled.optimizer.state[b]
        assert float(state_a["step"]) == float(state_b["step"])
        torch.testing.assert_close(state_a["exp_avg_sq"], state_b["exp_avg_sq"], atol=1e-7, rtol=1e-3)


@pytest.mark.parametrize(
    "env_id, changes",
    [
        pytest.param("CartPole-v1", {}, marks=pytest.mark.inductor),
        ("CartPole-v1", dict(target_kl=1e-4)),
        # a Gaussian policy (its log-std is a parameter too) and normalised observations
        pytest.param(
            "Pendulum-v1", dict(normalize_obs=True, normalize_reward=True), marks=pytest.mark.inductor
        ),
    ],
)
def test_compiled_update_matches_the_eager_one(cache: Path, env_id: str, changes: dict) -> None:
    eager, compiled = _pair(env_id, **changes)
    for _ in range(2):  # two iterations: the second starts from the first's state
        eager.learn(eager.n_steps * 8, reset_num_timesteps=False)
        compiled.learn(compiled.n_steps * 8, reset_num_timesteps=False)
        _assert_same_state(eager, compiled)
        assert eager._n_updates == compiled._n_updates
    # the compiled step for one model, torch.optim.Adam's for the other
    assert "update" in compiled._compiled.calls and not eager._compiled.calls


def test_compiled_rollout_values_and_statistics_match_the_eager_ones(cache: Path) -> None:
    """The compiled step of the policy (log-probabilities kept per step) and values give the
    eager numbers, GAE's advantages and the episode statistics too, truncated episodes (time
    limit 10) included."""
    made, logs = _pair("CartPole-v1"), []
    for model in made:
        logged: list[dict] = []
        model.learn(model.n_steps * 8 * 3, callback=lambda local, logged=logged: logged.append(local["logged"]))
        logs.append(logged)
    eager, compiled = made
    torch.testing.assert_close(compiled._rollout.log_prob, eager._rollout.log_prob, atol=1e-5, rtol=1e-5)
    assert list(compiled.ep_info_buffer) == list(eager.ep_info_buffer)
    assert any(e["l"] == TIME_LIMIT for e in eager.ep_info_buffer)  # some episodes were truncated
    for eager_logged, compiled_logged in zip(*logs, strict=True):
        for key in ("train/value_loss", "train/approx_kl", "episode/extrinsic", "reward/extrinsic"):
            assert compiled_logged[key] == pytest.approx(eager_logged[key], rel=1e-3, abs=1e-6), key
    # the env's step compiled into the rollout's steps (8 steps a call: 2 calls a rollout)
    assert set(compiled._compiled.calls) == {"update", "rollout", "score"}


def test_a_compiled_model_saves_loads_and_continues_eagerly(cache: Path, tmp_path: Path) -> None:
    _, compiled = _pair("CartPole-v1")
    compiled.learn(compiled.n_steps * 8)
    compiled.save(tmp_path / "model.pt")
    loaded = PPO.load(tmp_path / "model.pt", env=envs.make("CartPole-v1", num_envs=8, seed=3))
    assert loaded.config.compile
    loaded = PPO.load(tmp_path / "model.pt", env=envs.make("CartPole-v1", num_envs=8, seed=3))
    loaded.config = loaded.config.replace(compile=False)
    steps = float(loaded.optimizer.state[loaded._parameters[0]]["step"])
    loaded.learn(loaded.n_steps * 8)
    assert float(loaded.optimizer.state[loaded._parameters[0]]["step"]) > steps


@pytest.mark.inductor
def test_the_compiled_update_is_cached_on_disk(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, first = _pair("CartPole-v1")
    first.learn(first.n_steps * 8)
    files = sorted(cache_folder().glob("*.pt2"))
    assert files and cache_folder().parent == cache

    def no_tracing(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("traced again, although the recipe is in the cache")

    # the same network and settings: the libraries are loaded by their recipe, untraced
    monkeypatch.setattr(torch.fx.experimental.proxy_tensor, "make_fx", no_tracing)
    _, second = _pair("CartPole-v1")
    second.learn(second.n_steps * 8)
    assert sorted(cache_folder().glob("*.pt2")) == files  # loaded, not compiled again
    assert not list(cache_folder().glob("partial-*"))


def test_a_new_env_of_another_size_gets_its_own_compiled_calls(cache: Path) -> None:
    _, compiled = _pair("CartPole-v1")
    compiled.learn(compiled.n_steps * 8)
    first = compiled._compiled.calls["update"]
    compiled.set_env(envs.make("CartPole-v1", num_envs=4, seed=3))
    compiled.learn(compiled.n_steps * 4)  # shapes of 4 envs: compiled anew, not the 8-env library
    update = compiled._compiled.calls["update"]
    assert update is not first and update.batch_shapes[-1][0] == (48,)


def test_the_compiled_update_follows_a_state_loaded_into_the_optimiser(cache: Path) -> None:
    """The compiled step works on flat buffers the parameters and Adam state are views of;
    a state loaded into the optimiser (new tensors) is what the next compiled step reads
    and writes."""
    _, compiled = _pair("CartPole-v1")
    compiled.learn(compiled.n_steps * 8)
    saved = copy.deepcopy(compiled.optimizer.state_dict())
    compiled.learn(compiled.n_steps * 8, reset_num_timesteps=False)
    compiled.optimizer.load_state_dict(saved)
    compiled.learn(compiled.n_steps * 8, reset_num_timesteps=False)
    # 2 epochs of minibatches of 48, 48 and 32 rows: 4 compiled steps and 2 eager ones (the
    # shorter last minibatch's)
    for index, parameter in enumerate(compiled._parameters):
        state = compiled.optimizer.state[parameter]
        assert float(state["step"]) == float(saved["state"][index]["step"]) + 6
        assert not torch.equal(state["exp_avg"], saved["state"][index]["exp_avg"])


def test_compile_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="compile"):
        PPO(envs.make("CartPole-v1", num_envs=2), compile="yes")


def test_a_rollout_runs_in_compiled_calls_of_equal_steps() -> None:
    from rewardlab.agents.ppo import MAX_FUSED_STEPS, fused_steps

    assert MAX_FUSED_STEPS == 8
    assert [fused_steps(n) for n in (1, 8, 12, 16, 32, 37, 2048)] == [1, 8, 6, 8, 8, 1, 8]


def _shaped(env_id: str, potential: Any, compile: bool, **changes: Any) -> PPO:
    from rewardlab.shaping import BatchedPotentialShaping

    env = envs.make(env_id, num_envs=8, seed=3, max_episode_steps=20)
    env = BatchedPotentialShaping(env, potential, gamma=0.99)
    return PPO(env, seed=3, compile=compile, **{**SMALL, **changes})


@pytest.mark.parametrize("env_id", ["MountainCar-v0", "Pendulum-v1"])
def test_a_shaped_env_steps_inside_the_compiled_rollout_as_it_does_eagerly(cache: Path, env_id: str) -> None:
    """The shaping wrapper's step (the env's, then the potential's formula) runs in PPO's
    compiled rollout: the same observations, rewards and components as stepping it
    eagerly, over terminated and truncated episodes, and the wrapper's running potential
    and transition count continue from where the compiled steps left them."""
    from rewardlab.shaping import potentials

    eager, compiled = (
        _shaped(env_id, potentials.for_env(env_id), compile, normalize_obs=True) for compile in (False, True)
    )
    for model in (eager, compiled):
        model.learn(model.n_steps * 8 * 3)
    assert set(compiled._compiled.calls) == {"update", "rollout", "score"}
    assert any(e["l"] == 20 for e in eager.ep_info_buffer)  # truncated episodes
    for name in ("obs", "final_obs", "rewards", "components"):
        torch.testing.assert_close(getattr(compiled._rollout, name), getattr(eager._rollout, name), atol=1e-4, rtol=1e-4)
    assert torch.equal(compiled._rollout.truncated, eager._rollout.truncated)
    assert compiled._rollout.component_names == eager._rollout.component_names == ["extrinsic", "shaping"]
    tracker, eager_tracker = compiled.env.tracker, eager.env.tracker
    torch.testing.assert_close(tracker.phi, eager_tracker.phi, atol=1e-4, rtol=1e-4)
    assert tracker.num_transitions == eager_tracker.num_transitions == 16 * 8 * 3
    # the next eager step shapes from the potential the compiled steps left
    actions = torch.as_tensor(eager.env.action_space.sample())
    compiled.env.step(actions)
    eager.env.step(actions)
    torch.testing.assert_close(tracker.phi, eager_tracker.phi, atol=1e-4, rtol=1e-4)


class _UsersPotential:
    """A user's potential on MountainCar's observations: it does not say it traces."""

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        return 100.0 * obs[:, 1].abs()


class _UsersTracingPotential(_UsersPotential):
    traces = True


def test_a_shaped_env_with_a_potential_not_known_to_trace_steps_eagerly(cache: Path) -> None:
    # it may read a tensor's value in Python, which a trace would freeze
    model = _shaped("MountainCar-v0", _UsersPotential(), compile=True)
    model.learn(model.n_steps * 8)
    assert set(model._compiled.calls) == {"update", "act", "score"}
    traced = _shaped("MountainCar-v0", _UsersTracingPotential(), compile=True)
    traced.learn(traced.n_steps * 8)
    assert set(traced._compiled.calls) == {"update", "rollout", "score"}
    torch.testing.assert_close(traced._rollout.components, model._rollout.components, atol=1e-4, rtol=1e-4)


def test_a_potential_that_turns_nan_inside_the_compiled_rollout_is_named(cache: Path) -> None:
    class Exploding(_UsersTracingPotential):
        def __call__(self, obs: torch.Tensor) -> torch.Tensor:
            # finite at rest (each reset), NaN once the car moves
            return torch.where(obs[:, 1] == 0, 0.0, torch.log(obs[:, 1].abs() - 1))

    model = _shaped("MountainCar-v0", Exploding(), compile=True)
    with pytest.raises(ValueError, match="Exploding returned NaN or inf"):
        model.learn(model.n_steps * 8)
    assert model._compiled.calls["rollout"] is not None  # raised by the compiled rollout's commit


class _UsersCartPole(CartPoleEnv):
    """A user's own batched env: its module is not rewardlab's."""


def test_a_users_env_steps_eagerly_unless_its_user_compiles_its_step(cache: Path) -> None:
    # its step may read a tensor's value in Python, which a trace would freeze: PPO compiles
    # it into the rollout only when the env was made with compile=True
    env = _UsersCartPole(8, seed=3)
    model = PPO(env, seed=3, compile=True, **SMALL)
    model.learn(model.n_steps * 8)
    assert set(model._compiled.calls) == {"update", "act", "score"}


def test_an_env_step_that_does_not_compile_runs_eagerly_with_a_warning(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(self: PPOCompiled, *args: Any) -> None:
        raise RuntimeError("data-dependent control flow")

    monkeypatch.setattr(PPOCompiled, "_compile_rollout_steps", fail)
    eager, compiled = _pair("CartPole-v1")
    with pytest.warns(UserWarning, match="could not be compiled into PPO's rollout.*data-dependent"):
        compiled.learn(compiled.n_steps * 8)
    eager.learn(eager.n_steps * 8)
    calls = compiled._compiled.calls
    assert calls["act"] is not None and calls["rollout"] is None
    assert list(compiled.ep_info_buffer) == list(eager.ep_info_buffer)


def test_the_traced_tanh_is_tanh_to_float32_rounding() -> None:
    from rewardlab.agents.fused import _tanh

    x = torch.linspace(-12.0, 12.0, 2_000_001)
    y = _tanh(x)
    assert (y.double() - torch.tanh(x.double())).abs().max() < 4e-7
    assert y.abs().max() <= 1.0  # so that its gradient 1 - tanh^2 is never negative
    assert torch.equal(_tanh(-x), -y)
    tiny = torch.tensor([0.0, 1e-30])
    assert torch.equal(_tanh(tiny), tiny)


def _tiny_model() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    return module, [torch.randn(32, 3), torch.randn(32)]


def _tiny_loss(module: torch.nn.Module) -> Any:
    def loss(batch: Any, parameters: dict | None = None) -> tuple[torch.Tensor, ...]:
        x, y, idx = batch
        if parameters is None:
            out = module(x[idx])
        else:
            out = torch.func.functional_call(module, parameters, (x[idx],))
        error = (out.squeeze(-1) - y[idx]).square().mean()
        return error, error.detach()

    return loss


@pytest.mark.inductor
def test_the_step_is_torch_adam_after_gradient_clipping(cache: Path) -> None:
    """The compiled step is what ``loss.backward()``, ``clip_grad_norm_`` and
    ``torch.optim.Adam`` (PPO's eager step) make of the same minibatches, step for step,
    its state in the optimiser's; the eager step may take over between compiled ones."""
    from rewardlab.agents.base import clipped_gradient_step

    # the gradient norm passes the clip (1.0) at some steps and not at others
    generator = torch.Generator().manual_seed(0)
    indices = [torch.randperm(32, generator=generator)[:8] for _ in range(6)]
    reference, rows = _tiny_model()
    reference_loss = _tiny_loss(reference)
    optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2, eps=1e-5, fused=True)
    module, _ = _tiny_model()
    module_optimizer = torch.optim.Adam(module.parameters(), lr=1e-2, eps=1e-5, fused=True)
    loss = _tiny_loss(module)
    update = CompiledUpdate(module, module_optimizer, loss, 1.0, (*rows, indices[0]), "tiny-test")
    norms = []
    for step, idx in enumerate(indices):
        grads = torch.autograd.grad(reference_loss((*rows, idx))[0], list(reference.parameters()))
        norms.append(float(torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads]))))
        clipped_gradient_step(optimizer, reference_loss((*rows, idx))[0], 1.0)
        if step == 3:  # an eager step, as PPO takes for a shorter last minibatch
            clipped_gradient_step(module_optimizer, loss((*rows, idx))[0], 1.0)
        else:
            new_state, terms = update((*rows, idx), 1e-2)
            assert terms.shape == (2,)
            update.commit(new_state)
        for a, b in zip(module.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(a, b, msg=lambda m, step=step: f"step {step}: {m}")
            state, expected = module_optimizer.state[a], optimizer.state[b]
            assert float(state["step"]) == float(expected["step"]) == step + 1
            torch.testing.assert_close(state["exp_avg"], expected["exp_avg"])
            torch.testing.assert_close(state["exp_avg_sq"], expected["exp_avg_sq"])
    assert min(norms) < 1.0 < max(norms), norms


def test_a_step_not_committed_changes_nothing(cache: Path) -> None:
    module, rows = _tiny_model()
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-2)
    update = CompiledUpdate(module, optimizer, _tiny_loss(module), 0.5, (*rows, torch.arange(8)))
    before = {name: value.clone() for name, value in module.state_dict().items()}
    new_state, terms = update((*rows, torch.arange(8)), 1e-2)
    assert terms.shape == (2,) and not torch.equal(new_state[0], update._flat[0])
    assert not update.fits((*rows, torch.arange(5)))
    for name, value in module.state_dict().items():
        assert torch.equal(value, before[name]), name
