"""Intrinsic modules through agents.PPO's intrinsic= hook, on batched DeepSea."""

from __future__ import annotations

import pytest
import torch

from rewardlab import envs, intrinsic
from rewardlab.agents.ppo import PPO

SIZE, NUM_ENVS = 6, 8


# small networks run fastest on one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


def deepsea():
    return envs.make("DeepSea-v0", num_envs=NUM_ENVS, size=SIZE, seed=0)


def test_count_sees_the_true_last_observation_of_each_episode():
    env = deepsea()
    count = intrinsic.Count(env.single_observation_space, num_envs=NUM_ENVS)
    logged = []
    model = PPO(env, seed=0, n_steps=SIZE, n_epochs=1, intrinsic=count)
    model.learn(4 * SIZE * NUM_ENVS, callback=lambda loc: logged.append(dict(loc["logged"])))
    visits = count.visits(torch.eye(SIZE * SIZE)).reshape(SIZE, SIZE)
    # Row 0 is only ever a reset observation, never a next_obs. The bottom row is seen twice an
    # episode, as in bsuite: after step N - 1 and as the final observation (only in final_obs).
    assert visits[0].sum() == 0 and visits[1:-1].sum(dim=1).tolist() == [4 * NUM_ENVS] * (SIZE - 2)
    assert visits[-1].sum() == 2 * 4 * NUM_ENVS
    assert visits.sum() == 4 * SIZE * NUM_ENVS
    assert all(entry["reward/intrinsic/count"] > 0 for entry in logged)


@pytest.mark.parametrize("names", ["rnd", "surprise", "rnd,count"])
def test_modules_train_through_the_hook_with_a_non_episodic_intrinsic_head(names):
    env = deepsea()
    module = intrinsic.make(
        names, env.single_observation_space, env.single_action_space, num_envs=NUM_ENVS, seed=0
    )
    heads = {
        "extrinsic": {"gamma": 0.99, "weight": 2.0},
        "intrinsic": {"gamma": 0.99, "episodic": False},
    }
    parts = module.parts if isinstance(module, intrinsic.Hybrid) else [module]
    before = [p.clone() for m in parts for p in m.parameters() if p.requires_grad]
    model = PPO(env, seed=0, n_steps=SIZE, n_epochs=1, intrinsic=module, value_heads=heads)
    model.learn(2 * SIZE * NUM_ENVS)
    after = [p for m in parts for p in m.parameters() if p.requires_grad]
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_episodic_counts_get_episode_ends_from_the_hook():
    env = deepsea()
    count = intrinsic.EpisodicCount(env.single_observation_space, num_envs=NUM_ENVS)
    logged = []
    model = PPO(env, seed=0, n_steps=SIZE, n_epochs=1, intrinsic=count)
    model.learn(
        3 * SIZE * NUM_ENVS,
        callback=lambda loc: logged.append(loc["logged"]["reward/intrinsic/episodic"]),
    )
    # Within one DeepSea episode every cell is new, except a bottom-left cell seen twice by an
    # agent that walks into the wall on its last step: the episodic bonus is 1 almost always.
    assert all(0.9 < value <= 1.0 for value in logged)
    # every episode ended within the rollouts, so none is left open
    assert len(count._open_keys) == 0


def test_ppo_gives_the_bonus_a_non_episodic_head_of_its_own_by_default():
    env = deepsea()
    module = intrinsic.make("rnd,episodic", env.single_observation_space,
                            env.single_action_space, fusion="noveld", seed=0)  # fmt: skip
    logged = []
    model = PPO(env, seed=0, n_steps=SIZE, n_epochs=1, intrinsic=module, intrinsic_coef=0.5)
    assert [(h.component, h.weight, h.episodic) for h in model.heads] == [
        ("reward", 1.0, True), ("intrinsic", 0.5, False),
    ]  # fmt: skip
    model.learn(2 * SIZE * NUM_ENVS, callback=lambda loc: logged.append(loc["logged"]))
    keys = {"reward/intrinsic/hybrid", "reward/intrinsic/hybrid/rnd", "reward/intrinsic/hybrid/episodic"}
    assert keys <= set(logged[-1])
    with pytest.raises(TypeError, match="IntrinsicModule"):
        PPO(env, intrinsic=object())


def test_a_lifelong_and_episodic_fusion_solves_a_deepsea_that_plain_ppo_does_not():
    # a small end-to-end run: 10x10 DeepSea, the treasure 1 in 2**10 for a random walk
    size, num_envs, steps = 10, 32, 40_000

    def solved(names):
        env = envs.make("DeepSea-v0", num_envs=num_envs, size=size, seed=1)
        module = None
        if names:
            module = intrinsic.make(names, env.single_observation_space,
                                    env.single_action_space, seed=1)  # fmt: skip
        model = PPO(env, seed=1, n_steps=size, n_epochs=4, learning_rate=1e-3,
                    intrinsic=module, intrinsic_coef=0.1)  # fmt: skip
        model.learn(steps)
        return sum(e["r"] > 0.5 for e in model.ep_info_buffer) / len(model.ep_info_buffer)

    assert solved("count,episodic") > 0.5
    assert solved(None) < 0.1


def test_ppo_tells_the_module_how_many_envs_it_interleaves():
    from rewardlab import envs, intrinsic
    from rewardlab.agents import PPO

    env = envs.make("CartPole-v1", num_envs=6, seed=0)
    module = intrinsic.Count(env.single_observation_space, mode="simhash", hash_bits=8, seed=0)
    assert module.num_envs is None
    PPO(env, intrinsic=module, n_steps=8)
    assert module.num_envs == 6
