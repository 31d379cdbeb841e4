"""Episodic bonuses (per-episode counts, E3B) and the lifelong x episodic fusions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab import intrinsic
from rewardlab.intrinsic import E3B, RND, Count, EpisodicCount, Hybrid, IntrinsicModule
from rewardlab.intrinsic.base import Batch

# small networks run fastest on one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------- EpisodicCount
def test_episodic_count_resets_at_each_envs_episode_end_and_carries_open_episodes():
    count = EpisodicCount(spaces.Discrete(3), num_envs=2)
    # Time-major: rows are (t0 e0, t0 e1, t1 e0, t1 e1, t2 e0, t2 e1); env 0 ends at t1.
    states = torch.zeros(6, dtype=torch.long)
    dones = torch.tensor([False, False, True, False, False, False])
    bonus = count.compute(states, torch.zeros(6), states, dones=dones)
    assert count.last_visits.tolist() == [1, 1, 2, 2, 1, 3]
    assert bonus.tolist() == pytest.approx([n**-0.5 for n in [1, 1, 2, 2, 1, 3]])
    # env 1's episode carries over into the next batch; env 0's restarted at t2
    more = count.compute(states[:2], torch.zeros(2), states[:2], dones=dones[:2])
    assert more.tolist() == pytest.approx([2**-0.5, 4**-0.5])
    with pytest.raises(ValueError, match="dones"):
        count.compute(states, torch.zeros(6), states)


@settings(max_examples=30, deadline=None)
@given(
    num_envs=st.integers(1, 4),
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.booleans()), min_size=1,
                 max_size=6),
        min_size=1, max_size=4,
    ),
)  # fmt: skip
def test_episodic_count_agrees_with_a_dictionary_per_episode(num_envs, batches):
    space = spaces.MultiDiscrete([4, 3])
    count = EpisodicCount(space, num_envs=num_envs, bonus="first_visit", beta=0.5, seed=3)
    episodes: list[dict] = [{} for _ in range(num_envs)]
    for steps in batches:
        rows = [step for step in steps for _ in range(num_envs)]  # every env sees the step
        rows = [(a, (b + e) % 3, d and e % 2 == 0) for e, (a, b, d) in enumerate(rows)]
        cells = torch.tensor([[a, b] for a, b, _ in rows])
        dones = torch.tensor([d for _, _, d in rows])
        bonus = count.compute(cells, torch.zeros(len(rows)), cells, dones=dones)
        expected = []
        for row, (a, b, d) in enumerate(rows):
            episode = episodes[row % num_envs]
            episode[(a, b)] = episode.get((a, b), 0) + 1
            expected.append(episode[(a, b)])
            if d:
                episode.clear()
        assert count.last_visits.tolist() == expected
        assert bonus.tolist() == pytest.approx([0.5 * (n == 1) for n in expected])


def test_episodic_count_on_images_and_its_state_survives_a_save():
    space = spaces.Box(0, 10, (3, 3, 2), dtype=np.uint8)
    count = EpisodicCount(space, num_envs=1)
    views = torch.randint(0, 11, (2, 3, 3, 2), dtype=torch.uint8)
    seq = views[[0, 1, 0]]
    count.compute(seq, torch.zeros(3), seq, dones=torch.zeros(3, dtype=torch.bool))
    restored = EpisodicCount(space, num_envs=1)
    restored.load_state_dict(count.state_dict())
    restored.compute(views[:1], torch.zeros(1), views[:1], dones=torch.zeros(1, dtype=torch.bool))
    assert restored.last_visits.tolist() == [3]


def test_episodic_count_refuses_bad_arguments_with_their_values():
    with pytest.raises(ValueError, match="bonus must be one of"):
        EpisodicCount(spaces.Discrete(2), bonus="log")
    with pytest.raises(ValueError, match="beta must be positive, got -1"):
        EpisodicCount(spaces.Discrete(2), beta=-1)
    count = EpisodicCount(spaces.Discrete(2), num_envs=2)
    with pytest.raises(ValueError, match="dones has 3 rows"):
        count.compute(torch.zeros(4), torch.zeros(4), torch.zeros(4), dones=torch.zeros(3))


# ----------------------------------------------------------------------------- E3B
def test_e3b_is_the_elliptical_bonus_of_the_episode_so_far_and_resets_at_its_end():
    space = spaces.Box(-1.0, 1.0, (5,))
    e3b = E3B(space, spaces.Discrete(3), num_envs=1, feature_dim=4, ridge=0.1, seed=0)
    obs = torch.randn(6, 5)
    dones = torch.tensor([False, False, True, False, False, False])
    bonus = e3b.compute(obs, torch.zeros(6), obs, dones=dones)
    with torch.no_grad():
        phi = e3b.encoder(e3b.whiten(obs))
    expected, covariance = [], 0.1 * torch.eye(4)
    for t in range(6):
        expected.append(float(phi[t] @ torch.linalg.solve(covariance, phi[t])))
        covariance = covariance + torch.outer(phi[t], phi[t])
        if dones[t]:
            covariance = 0.1 * torch.eye(4)
    assert bonus.tolist() == pytest.approx(expected, rel=1e-4)
    # the same state again in the same episode is worth less; after an end, as much as at first
    again = e3b.compute(obs[5:6], torch.zeros(1), obs[5:6], dones=torch.ones(1, dtype=torch.bool))
    assert again.item() < bonus[5].item()
    restored = E3B(space, spaces.Discrete(3), num_envs=1, feature_dim=4, ridge=0.1, seed=1)
    restored.load_state_dict(e3b.state_dict())
    fresh = restored.compute(obs[:1], torch.zeros(1), obs[:1], dones=torch.zeros(1))
    assert fresh.item() == pytest.approx(expected[0], rel=1e-4)  # the same embedding, a new episode


def test_e3b_learns_its_embedding_by_inverse_dynamics():
    space = spaces.Box(-1.0, 1.0, (4,))
    e3b = E3B(space, spaces.Discrete(4), feature_dim=8, update_proportion=1.0, epochs=20,
              minibatch_size=64, seed=0)  # fmt: skip
    obs = torch.randn(256, 4)
    actions = torch.randint(0, 4, (256,))
    next_obs = obs + torch.eye(4)[actions]  # the action says which coordinate grows
    e3b.update(obs, actions, next_obs)
    first = e3b.last_loss
    for _ in range(5):
        e3b.update(obs, actions, next_obs)
    assert e3b.last_loss < 0.5 * first


# ---------------------------------------------------------------------------- fusions
class Constant(IntrinsicModule):
    """The same bonus for every transition."""

    def __init__(self, value: float, episodic: bool = False) -> None:
        super().__init__(spaces.Discrete(8), None, "constant")
        self.value, self.episodic = value, episodic

    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        return torch.full((len(torch.as_tensor(next_obs)),), self.value)

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        pass


def ranks(values: torch.Tensor) -> list[int]:
    return torch.argsort(torch.argsort(values, stable=True), stable=True).tolist()


@pytest.mark.parametrize("fusion", ["sum", "product", "max", "ngu"])
def test_a_fusion_of_a_constant_with_a_module_keeps_the_modules_ordering(fusion):
    # the constant normalised is 1: weighted below the module's bonuses, so that max does not
    # hide them; episodic for ngu, whose lifelong modulator is then the count
    states = torch.tensor([0, 1, 1, 2, 2, 2, 3, 3, 3, 3])
    count = Count(spaces.Discrete(8))
    hybrid = Hybrid([Constant(7.0, episodic=fusion == "ngu"), Count(spaces.Discrete(8))],
                    fusion=fusion, weights=[0.01, 1.0])  # fmt: skip
    dones = torch.zeros(10, dtype=torch.bool)
    alone = count.compute(states, states, states, dones=dones)
    fused = hybrid.compute(states, states, states, dones=dones)
    if fusion == "ngu":
        # NGU's modulator is clipped below at 1: below-average novelty ties, never reorders
        order = torch.argsort(alone, stable=True)
        assert bool((fused[order].diff() >= -1e-6).all()) and fused[0] > fused[-1]
    else:
        assert ranks(fused) == ranks(alone)


def test_ngu_multiplies_the_episodic_bonus_by_a_clipped_lifelong_modulator():
    space = spaces.Discrete(4)
    hybrid = Hybrid([Count(space), EpisodicCount(space, num_envs=1)], fusion="ngu",
                    max_modulator=1.5)  # fmt: skip
    hybrid.set_num_envs(1)
    states = torch.tensor([0, 0, 0, 1])
    dones = torch.zeros(4, dtype=torch.bool)
    fused = hybrid.compute(states, states, states, dones=dones)
    lifelong = torch.tensor([1, 2**-0.5, 3**-0.5, 1.0])
    episodic = lifelong.clone()  # one episode: the same counts
    scale = math.sqrt(float(episodic.square().mean()))
    modulator = (1 + (lifelong - lifelong.mean()) / lifelong.std(unbiased=False)).clamp(1, 1.5)
    assert fused.tolist() == pytest.approx((episodic / scale * modulator).tolist(), rel=1e-3)
    with pytest.raises(ValueError, match="at least one of each"):
        Hybrid([Count(space), RND(space, seed=0)], fusion="ngu")


def test_noveld_rewards_the_frontier_once_per_episode():
    space = spaces.Discrete(8)
    lifelong = Count(space)
    hybrid = Hybrid([lifelong, EpisodicCount(space, num_envs=1)], fusion="noveld", alpha=0.5)
    hybrid.set_num_envs(1)
    familiar = torch.tensor([0] * 15)
    hybrid.compute(familiar, familiar, familiar, dones=torch.zeros(15, dtype=torch.bool))
    # one episode: 0 -> 5 (new, frontier), 5 -> 0 (back to the familiar: no bonus),
    # 0 -> 5 (seen in this episode: gated), then after an episode end 0 -> 5 again
    obs = torch.tensor([0, 5, 0, 0])
    next_obs = torch.tensor([5, 0, 5, 5])
    dones = torch.tensor([False, False, True, True])
    fused = hybrid.compute(obs, obs, next_obs, dones=dones)
    assert fused[0] > 0 and fused[1] == 0 and fused[2] == 0
    # a first visit again after the episode end; the novelty is the one before the batch
    assert fused[3] == pytest.approx(float(fused[0]))
    # next batch: 5 is counted 3 times now, so it is less of a frontier (but still above 0)
    later = hybrid.compute(obs[3:], obs[3:], next_obs[3:], dones=torch.ones(1, dtype=torch.bool))
    assert 0 < later[0] < fused[0]
    with pytest.raises(ValueError, match="noveld"):
        Hybrid([lifelong, RND(space, seed=0)], fusion="noveld")


def test_make_builds_the_episodic_modules_and_their_fusions_by_name():
    obs_space, act_space = spaces.Box(0, 5, (4,), dtype=np.int64), spaces.Discrete(3)
    for fusion in intrinsic.FUSIONS:
        module = intrinsic.make("rnd,episodic", obs_space, act_space, fusion=fusion,
                                num_envs=2, seed=0)  # fmt: skip
        obs = torch.randint(0, 6, (8, 4))
        bonus = module.compute(obs, torch.zeros(8, dtype=torch.long), obs,
                               dones=torch.zeros(8, dtype=torch.bool))  # fmt: skip
        assert bonus.shape == (8,) and bool(torch.isfinite(bonus).all())
        assert {"rnd", "episodic"} == set(module.last_parts)
    assert isinstance(intrinsic.make("e3b", obs_space, act_space), E3B)
