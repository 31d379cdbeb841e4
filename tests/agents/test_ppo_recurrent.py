"""rewardlab.agents.PPO with recurrent=: the memory carried and zeroed at episode ends, the
update's re-run of the rollout, bonuses and value heads, predict's state, save/load, and a
task that needs memory."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from memory_envs import RememberTheCue

from rewardlab import envs, intrinsic
from rewardlab.agents import PPO
from rewardlab.agents.evaluation import play_episodes

# episodes of 2, 3 and 4 steps, ending at known steps
DELAYS = [1, 2, 3, 1, 2, 3]


# small networks run fastest on one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


def recording(model: PPO) -> list[torch.Tensor]:
    """The memory each rollout step's policy reads, recorded as the rollout runs."""
    seen: list[torch.Tensor] = []
    sample = model.policy.sample

    def recorded(obs: torch.Tensor, noise: torch.Tensor, state: torch.Tensor) -> Any:
        seen.append(state.clone())
        return sample(obs, noise, state)

    model.policy.sample = recorded
    return seen


@pytest.mark.parametrize("core", ["gru", "lstm"])
def test_the_memory_is_zeroed_exactly_where_an_episode_ended(core: str) -> None:
    env = RememberTheCue(len(DELAYS), delay=DELAYS)
    model = PPO(env, n_steps=12, recurrent=core, recurrent_hidden_size=8, n_epochs=1)
    seen = recording(model)
    model.learn(2 * 12 * len(DELAYS))
    memory = torch.stack(seen)  # (steps, envs, state)
    lengths = torch.tensor(DELAYS) + 1
    starts = torch.arange(len(seen)).unsqueeze(-1) % lengths == 0  # (steps, envs)
    assert memory.shape == (24, len(DELAYS), model.policy.state_size)
    assert torch.all(memory[starts] == 0)
    assert torch.all(memory[~starts].abs().sum(dim=-1) > 0)


@pytest.mark.parametrize("settings", [
    {"recurrent": "gru"},
    {"recurrent": "lstm", "normalize_obs": True},  # the first rollout's log-probs taken again
    {"recurrent": "gru", "batch_size": 20},  # minibatches of 2 envs
])  # fmt: skip
def test_the_update_re_runs_the_rollout_as_it_was_acted(settings: dict[str, Any]) -> None:
    """At the first minibatch of an update, before any step, the re-run sequences give the
    rollout's own log-probabilities: the ratio is 1 (an approximate KL of 0). Rollouts of 10
    steps start within episodes of 2, 3 and 4 steps, from the memory the last one left."""
    env = RememberTheCue(len(DELAYS), delay=DELAYS)
    model = PPO(env, n_steps=10, recurrent_hidden_size=8, **settings)
    with torch.no_grad():  # a policy whose actions hang on its memory
        model.policy.actor[-1].weight.mul_(300)
        model.policy.core.weight_hh.mul_(3)
    firsts: list[tuple[float, float]] = []
    update_starts = [True]
    loss = model._loss

    def first_loss(batch: Any, parameters: Any = None) -> Any:
        losses = loss(batch, parameters)
        if update_starts[0]:
            update_starts[0] = False
            *rollout, memory, _ = batch
            every_env = torch.arange(memory.shape[0])
            right = loss((*rollout, memory, every_env)).approx_kl
            wrong = loss((*rollout, torch.zeros_like(memory), every_env)).approx_kl  # from zeros
            firsts.append((float(losses.approx_kl), float(right), float(wrong)))
        return losses

    model._loss = first_loss
    model.learn(3 * 10 * len(DELAYS), callback=lambda _: update_starts.__setitem__(0, True))
    assert len(firsts) == 3
    for first_minibatch, every_env, _ in firsts:
        assert abs(first_minibatch) < 1e-7 and abs(every_env) < 1e-7
    # the test tells: re-run from another memory, the policy is another one
    assert max(from_zeros for *_, from_zeros in firsts[1:]) > 1e-5


def test_a_recurrent_policy_remembers_the_cue_where_one_without_memory_cannot() -> None:
    def success(recurrent: str | None, seed: int) -> float:
        env = RememberTheCue(16, delay=3, seed=seed)
        memory = {"recurrent": recurrent, "recurrent_hidden_size": 32} if recurrent else {}
        model = PPO(env, seed=seed, n_steps=16, learning_rate=1e-2, n_epochs=4, net_arch=[32],
                    gamma=0.9, ent_coef=0.01, batch_size=16 * 8, **memory)  # fmt: skip
        model.learn(8_000)
        played = play_episodes(model, RememberTheCue(64, delay=3, seed=100 + seed))
        return sum(r > 0 for r in played.returns) / 64

    assert success("gru", 0) == 1.0
    assert success(None, 0) < 0.75


@pytest.mark.parametrize(("names", "fusion"), [
    *((name, "sum") for name in intrinsic.registered()), ("rnd,episodic", "noveld"),
])  # fmt: skip
def test_every_bonus_trains_a_recurrent_policy_with_its_own_head(names: str, fusion: str) -> None:
    env = envs.make("DeepSea-v0", num_envs=8, size=6, seed=0)
    module = intrinsic.make(names, env.single_observation_space, env.single_action_space,
                            num_envs=8, seed=0, fusion=fusion)  # fmt: skip
    logged: list[dict[str, float]] = []
    model = PPO(env, n_steps=6, n_epochs=2, recurrent="gru", recurrent_hidden_size=16,
                intrinsic=module)  # fmt: skip
    model.learn(3 * 6 * 8, callback=lambda loc: logged.append(dict(loc["logged"])))
    assert [h.component for h in model.heads] == ["reward", "intrinsic"]
    assert all(torch.isfinite(torch.tensor(entry["train/value_loss"])) for entry in logged)
    assert any(entry[f"reward/intrinsic/{module.name}"] > 0 for entry in logged)


def test_truncated_episodes_bootstrap_from_the_memory_of_their_last_step() -> None:
    env = envs.make("CartPole-v1", num_envs=4, device="cpu", seed=0, max_episode_steps=10)
    model = PPO(env, n_steps=16, recurrent="gru", recurrent_hidden_size=8, n_epochs=1)
    cut = []
    model.learn(2 * 16 * 4, callback=lambda loc: cut.append(bool(loc["rollout"].truncated.any())))
    assert any(cut)


def test_predict_carries_the_memory_and_save_load_keeps_it(tmp_path: Any) -> None:
    env = RememberTheCue(4, delay=2)
    model = PPO(env, n_steps=6, recurrent="lstm", recurrent_hidden_size=16)
    model.learn(2 * 6 * 4)
    model.save(tmp_path / "model.pt")
    loaded = PPO.load(tmp_path / "model.pt")
    assert loaded.config.recurrent == "lstm" and loaded.policy.state_size == 32

    obs = env.reset()[0]
    actions, state = model.predict(obs.numpy())
    assert state.shape == (4, 32)
    again, state_again = loaded.predict(obs.numpy())
    assert (actions == again).all() and (state == state_again).all()
    # the memory goes on from the state given, and starts afresh where an episode starts
    _, on = model.predict(obs, state=torch.as_tensor(state))
    _, fresh = model.predict(obs, state=torch.as_tensor(state), episode_start=torch.ones(4, dtype=bool))
    assert not torch.equal(on, fresh) and torch.allclose(fresh, torch.as_tensor(state))
    one, state_one = model.predict(obs[0].numpy())
    assert one.shape == () and state_one.shape == (32,)
    with pytest.raises(ValueError, match=r"state has shape \(3,\)"):
        model.predict(obs.numpy(), state=state[0, :3])


@pytest.mark.parametrize(("settings", "message"), [
    ({"recurrent": "rnn"}, "recurrent must be None, 'gru' or 'lstm'"),
    ({"recurrent": "gru", "recurrent_hidden_size": 0}, "recurrent_hidden_size must be"),
])  # fmt: skip
def test_bad_recurrent_settings_are_one_line(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PPO(RememberTheCue(2), **settings)


@pytest.mark.parametrize("make", [
    lambda: RememberTheCue(len(DELAYS), delay=DELAYS),  # stepped eagerly between compiled steps
    lambda: envs.make("CartPole-v1", num_envs=6, device="cpu", seed=0),  # stepped in the graph
])  # fmt: skip
def test_compiled_is_the_same_code_as_eager(make: Any) -> None:
    models = [PPO(make(), n_steps=10, batch_size=20, n_epochs=2, recurrent="gru",
                  recurrent_hidden_size=8, compile=compile) for compile in (False, True)]  # fmt: skip
    models[1].warm_up()
    for model in models:
        model.learn(3 * 10 * 6)
    eager, compiled = models
    assert "update" in compiled._compiled.calls
    assert [e["r"] for e in eager.ep_info_buffer] == [e["r"] for e in compiled.ep_info_buffer]
    for a, b in zip(eager.policy.parameters(), compiled.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_a_minibatch_of_part_of_a_sequence_is_refused() -> None:
    with pytest.raises(ValueError, match="batch_size=10 is not a multiple of n_steps=4"):
        PPO(RememberTheCue(4), n_steps=4, batch_size=10, recurrent="gru")


def test_a_recurrent_core_reads_minigrids_view_through_the_cnn(tmp_path: Any) -> None:
    env = envs.make("MiniGrid-Empty-5x5-v0", num_envs=4, seed=0)
    model = PPO(env, n_steps=8, image_shape=[7, 7, 3], recurrent="gru", recurrent_hidden_size=16)
    model.learn(2 * 8 * 4)
    assert type(model.policy.reader).__name__ == "ImageEncoder"
    model.save(tmp_path / "model.pt")
    loaded = PPO.load(tmp_path / "model.pt", env=envs.make("MiniGrid-Empty-5x5-v0", num_envs=4))
    obs = env.reset()[0]
    assert torch.equal(loaded.predict(obs)[1], model.predict(obs)[1])
    loaded.learn(8 * 4, reset_num_timesteps=False)
