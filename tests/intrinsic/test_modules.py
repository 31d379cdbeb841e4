"""The intrinsic modules: exact counts, RND novelty and normalisation, ICM, fusion, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab import intrinsic
from rewardlab.envs import WholeNumberBox
from rewardlab.intrinsic import RND, Count, DecaySchedule, Hybrid, IntrinsicModule, Surprise
from rewardlab.intrinsic.base import Batch

# small networks run fastest on one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


def one_hot(indices: list[int], size: int) -> torch.Tensor:
    return torch.eye(size)[torch.tensor(indices)]


# ---------------------------------------------------------------------------- Count
def test_count_exact_on_a_scripted_sequence_across_batches():
    count = Count(spaces.Discrete(4), beta=2.0)
    first = torch.tensor([1, 1, 2, 1])
    second = torch.tensor([2, 3, 1])
    expected_first = [2 / math.sqrt(n) for n in (1, 2, 1, 3)]
    expected_second = [2 / math.sqrt(n) for n in (2, 1, 4)]
    assert count.compute(first, first, first).tolist() == pytest.approx(expected_first)
    assert count.compute(second, second, second).tolist() == pytest.approx(expected_second)
    assert count.distinct == 3
    assert count.visits(torch.tensor([0, 1, 2, 3, 1])).tolist() == [0, 4, 2, 1, 4]


def test_count_counts_next_obs_of_one_hot_grids_exactly():
    space = WholeNumberBox(0.0, 1.0, (9,), dtype=np.float32)
    count = Count(space)
    assert count.mode == "exact"
    obs = one_hot([0, 0, 0], 9)
    next_obs = one_hot([4, 5, 4], 9)
    bonus = count.compute(obs, torch.zeros(3), next_obs)
    assert bonus.tolist() == pytest.approx([1.0, 1.0, 1 / math.sqrt(2)])


def test_count_multidiscrete_and_integer_boxes_are_exact():
    count = Count(spaces.MultiDiscrete([3, 4]))
    cells = torch.tensor([[0, 1], [0, 1], [2, 3]])
    assert count.compute(cells, torch.zeros(3), cells).tolist() == pytest.approx([1, 2**-0.5, 1])
    grid = Count(spaces.Box(0, 10, (2, 2), dtype=np.uint8))
    assert grid.mode == "exact"
    images = torch.tensor([[[1, 2], [3, 4]]] * 2, dtype=torch.uint8)
    assert grid.compute(images, torch.zeros(2), images).tolist() == pytest.approx([1, 2**-0.5])


def test_count_is_lifelong_it_does_not_reset_at_episode_ends():
    count = Count(spaces.Discrete(3), num_envs=2)
    states = torch.zeros(6, dtype=torch.long)
    dones = torch.ones(6, dtype=torch.bool)  # every transition ends its episode
    bonus = count.compute(states, torch.zeros(6), states, dones=dones)
    assert bonus.tolist() == pytest.approx([n**-0.5 for n in range(1, 7)])
    assert count.compute(states[:2], torch.zeros(2), states[:2], dones=dones[:2]).tolist() == (
        pytest.approx([7**-0.5, 8**-0.5])
    )


def test_simhash_gives_equal_observations_one_code_and_far_ones_different_codes():
    count = Count(spaces.Box(-np.inf, np.inf, (4,)), hash_bits=64, seed=0)
    assert count.mode == "simhash"
    obs = torch.tensor([[1.0, 2.0, -3.0, 0.5], [1.0, 2.0, -3.0, 0.5], [-4.0, 1.0, 2.0, -1.0]])
    bonus = count.compute(obs, torch.zeros(3), obs)
    assert bonus.tolist() == pytest.approx([1.0, 2**-0.5, 1.0])


def test_count_refuses_continuous_values_in_exact_mode():
    count = Count(spaces.Box(0.0, 1.0, (3,)), mode="exact")
    with pytest.raises(ValueError, match="simhash"):
        count.compute(torch.zeros(1, 3), torch.zeros(1), torch.full((1, 3), 0.5))


def test_count_hashes_a_continuous_observation_scaled_to_the_unit_box():
    # a float Box(0, 1) says nothing of its values: only the envs' one-hot spaces say so
    count = Count(spaces.Box(0.0, 1.0, (2,), dtype=np.float32), seed=0)
    assert count.mode == "simhash"
    obs = torch.tensor([[0.31, 0.27], [0.31, 0.27], [0.9, 0.05]])
    assert count.compute(obs, torch.zeros(3), obs).shape == (3,)
    assert count.visits(obs[:1]).tolist() == [2]


@settings(max_examples=25, deadline=None)
@given(
    states=st.lists(st.integers(0, 5), min_size=1, max_size=40),
    cuts=st.lists(st.integers(1, 40), max_size=4),
)
def test_count_is_the_same_however_a_sequence_is_split_into_batches(states, cuts):
    whole = Count(spaces.Discrete(6))
    sequence = torch.tensor(states)
    expected = whole.compute(sequence, sequence, sequence)
    split = Count(spaces.Discrete(6))
    bounds = sorted({c for c in cuts if c < len(states)} | {0, len(states)})
    parts = [sequence[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    got = torch.cat([split.compute(p, p, p) for p in parts])
    assert torch.allclose(got, expected)
    seen: dict[int, int] = {}
    for s, bonus in zip(states, expected.tolist(), strict=True):
        seen[s] = seen.get(s, 0) + 1
        assert bonus == pytest.approx(seen[s] ** -0.5)


def test_count_state_dict_keeps_the_counts():
    count = Count(spaces.Discrete(3))
    states = torch.tensor([0, 1, 1])
    count.compute(states, states, states)
    restored = Count(spaces.Discrete(3))
    restored.load_state_dict(count.state_dict())
    assert restored.compute(states[1:2], states[1:2], states[1:2]).item() == pytest.approx(3**-0.5)


# ------------------------------------------------------------------------------ RND
def test_rnd_bonus_is_higher_for_unseen_than_for_repeatedly_seen_states():
    size = 32
    rnd = RND(spaces.Box(0.0, 1.0, (size,)), normalize_reward=False, seed=0)
    seen = one_hot(list(range(8)) * 32, size)
    actions = torch.zeros(len(seen), dtype=torch.long)
    for _ in range(30):
        rnd.update(seen, actions, seen)
    familiar = rnd.compute(seen[:8], actions[:8], seen[:8])
    novel = rnd.compute(
        one_hot(list(range(16, 24)), size), actions[:8], one_hot(list(range(16, 24)), size)
    )
    assert novel.min() > 10 * familiar.max()


def test_rnd_normalises_by_the_deviation_of_the_discounted_intrinsic_return():
    space = spaces.Box(-1.0, 1.0, (3,))
    raw = RND(space, normalize_reward=False, seed=1)
    normalised = RND(space, normalize_reward=True, num_envs=2, gamma=0.9, seed=1)
    obs = torch.rand(6, 3, generator=torch.Generator().manual_seed(0)) * 2 - 1
    raw.init_obs_stats(obs)
    normalised.init_obs_stats(obs)
    actions = torch.zeros(6)
    errors = raw.compute(obs, actions, obs).view(3, 2)
    returns = torch.zeros(3, 2)
    running = torch.zeros(2)
    for t in range(3):  # a forward filter per env, across the (steps, envs) batch
        running = 0.9 * running + errors[t]
        returns[t] = running
    bonus = normalised.compute(obs, actions, obs)
    # The running variance starts as one pseudo-sample (count 1e-4) of mean 0, variance 1.
    flat, prior = returns.flatten().double(), 1e-4
    total = prior + len(flat)
    var = (
        prior + flat.var(unbiased=False) * len(flat) + flat.mean() ** 2 * prior * len(flat) / total
    ) / total
    assert bonus.tolist() == pytest.approx((errors.flatten() / var.sqrt()).tolist(), rel=1e-4)


@pytest.mark.parametrize("kind", ["gymnasium", "vector", "sb3", "batched"])
def test_random_observations_from_every_kind_of_env(kind):
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env

    from rewardlab import envs

    env = {
        "gymnasium": lambda: gym.make("CartPole-v1"),
        "vector": lambda: gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync"),
        "sb3": lambda: make_vec_env("CartPole-v1", n_envs=2),
        "batched": lambda: envs.make("CartPole-v1", num_envs=2, seed=0),
    }[kind]()
    rows = intrinsic.random_observations(env, num_steps=30, seed=0)
    assert rows.shape == ((30, 4) if kind == "gymnasium" else (60, 4))
    assert rows.dtype == torch.float32 and bool(torch.isfinite(rows).all())


def test_rnd_initialises_whitening_from_a_random_rollout():
    import gymnasium as gym

    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    rows = intrinsic.random_observations(env, num_steps=50, seed=0)
    assert rows.shape == (100, 4)
    rnd = RND(env.single_observation_space, seed=0)
    rnd.init_obs_stats(rows)
    assert torch.allclose(rnd.obs_rms.mean, rows.double().mean(0), atol=1e-4)


def test_rnd_trains_the_predictor_on_a_fraction_of_the_batch():
    space = spaces.Box(-1.0, 1.0, (4,))
    rnd = RND(space, update_proportion=0.25, epochs=1, minibatch_size=1, seed=0)
    steps = []
    rnd.optimizer.step = lambda closure=None, _step=rnd.optimizer.step: steps.append(1) or _step()
    obs = torch.rand(40, 4)
    rnd.update(obs, torch.zeros(40), obs)
    assert len(steps) == 10


# ------------------------------------------------------------------------- Surprise
@pytest.mark.parametrize(
    ("action_space", "actions"),
    [
        (spaces.Discrete(3), torch.tensor([0, 1, 2, 1] * 16)),
        (spaces.Box(-1.0, 1.0, (2,)), torch.tensor([[0.5, -0.5], [-0.5, 0.5]] * 32)),
        (spaces.MultiDiscrete([2, 3]), torch.tensor([[0, 2], [1, 0]] * 32)),
    ],
)
@pytest.mark.parametrize("inverse_model", [True, False])
def test_surprise_falls_on_transitions_its_model_has_learned(action_space, actions, inverse_model):
    space = spaces.Box(-1.0, 1.0, (4,))
    icm = Surprise(space, action_space, inverse_model=inverse_model, epochs=4, seed=0)
    gen = torch.Generator().manual_seed(0)
    obs = torch.rand(64, 4, generator=gen)
    next_obs = torch.roll(obs, 1, dims=1) * 0.5
    before = icm.compute(obs, actions, next_obs).mean()
    for _ in range(25):
        icm.update(obs, actions, next_obs)
    after = icm.compute(obs, actions, next_obs).mean()
    assert after < 0.5 * before


def test_surprise_without_inverse_model_keeps_a_fixed_random_encoder():
    icm = Surprise(spaces.Box(-1.0, 1.0, (4,)), spaces.Discrete(2), inverse_model=False, seed=0)
    encoder_before = [p.clone() for p in icm.encoder.parameters()]
    obs = torch.rand(16, 4)
    icm.update(obs, torch.zeros(16, dtype=torch.long), obs)
    assert all(
        torch.equal(a, b) for a, b in zip(encoder_before, icm.encoder.parameters(), strict=True)
    )


@pytest.mark.parametrize("inverse_model", [True, False])
def test_surprise_whitens_its_inputs_so_the_units_do_not_set_the_bonus(inverse_model):
    # raw uint8 pixels gave a bonus about 50,000 times that of the same pixels / 255
    pixels = spaces.Box(0, 255, (6, 6, 3), np.uint8)
    unit = spaces.Box(0.0, 1.0, (6, 6, 3), np.float32)
    gen = torch.Generator().manual_seed(0)
    obs, next_obs = (torch.randint(0, 256, (64, 6, 6, 3), generator=gen, dtype=torch.uint8) for _ in range(2))
    actions = torch.randint(0, 4, (64,), generator=gen)
    raw = Surprise(pixels, spaces.Discrete(4), inverse_model=inverse_model, seed=0)
    scaled = Surprise(unit, spaces.Discrete(4), inverse_model=inverse_model, seed=0)
    for _ in range(2):
        bonus = raw.compute(obs, actions, next_obs)
        torch.testing.assert_close(bonus, scaled.compute(obs / 255, actions, next_obs / 255), rtol=1e-3, atol=1e-4)
        assert 0 < bonus.mean() < 50
        raw.update(obs, actions, next_obs)
        scaled.update(obs / 255, actions, next_obs / 255)
    assert raw.obs_rms.mean.shape == (6 * 6 * 3,) and "obs_rms.mean" in raw.state_dict()


# --------------------------------------------------------------------------- Hybrid
class Scripted(IntrinsicModule):
    """Returns the bonuses it is given, one batch per call; counts its updates."""

    def __init__(self, batches: list[list[float]], name: str) -> None:
        super().__init__(spaces.Discrete(2), None, name)
        self.batches = [torch.tensor(b) for b in batches]
        self.calls = 0
        self.updates = 0

    def compute(
        self, obs: Batch, actions: Batch, next_obs: Batch, dones: Batch | None = None
    ) -> torch.Tensor:
        self.calls += 1
        return self.batches[self.calls - 1]

    def update(self, obs: Batch, actions: Batch, next_obs: Batch) -> None:
        self.updates += 1


A = [[1.0, 3.0], [2.0, 0.0]]
B = [[4.0, 0.0], [1.0, 1.0]]


def hand_normalised(batches: list[list[float]]) -> list[np.ndarray]:
    """b / running RMS, the RMS over every value up to and including the batch."""
    seen: list[float] = []
    out = []
    for batch in batches:
        seen += batch
        out.append(np.array(batch) / math.sqrt(np.mean(np.square(seen)) + 1e-8))
    return out


@pytest.mark.parametrize("fusion", ["sum", "product", "cycle", "max"])
def test_each_fusion_matches_a_hand_computation(fusion):
    weights = [0.5, 2.0]
    schedule = DecaySchedule(beta=0.8, kappa=0.1)
    hybrid = Hybrid(
        [Scripted(A, "a"), Scripted(B, "b")], fusion=fusion, weights=weights, schedule=schedule
    )
    a_hat, b_hat = hand_normalised(A), hand_normalised(B)
    x = torch.zeros(2, dtype=torch.long)
    for t in range(2):
        terms = [weights[0] * a_hat[t], weights[1] * b_hat[t]]
        expected = (
            {
                "sum": terms[0] + terms[1],
                "product": terms[0] * terms[1],
                "cycle": terms[t % 2],
                "max": np.maximum(terms[0], terms[1]),
            }[fusion]
            * 0.8
            * 0.9**t
        )
        assert hybrid.compute(x, x, x).tolist() == pytest.approx(expected.tolist())
        assert set(hybrid.last_parts) == {"a", "b"}
        hybrid.update(x, x, x)
    assert [m.updates for m in hybrid.parts] == [2, 2]
    restored = Hybrid([Scripted(A, "a"), Scripted(B, "b")], fusion=fusion)
    restored.load_state_dict(hybrid.state_dict())
    assert restored.updates == 2 and restored.active == 0


def test_hybrid_passes_num_envs_to_its_modules_and_refuses_duplicates():
    space = spaces.Box(0.0, 1.0, (4,))
    hybrid = Hybrid([RND(space, seed=0), Count(space)])
    hybrid.set_num_envs(4)
    assert [m.num_envs for m in hybrid.parts] == [4, 4]
    with pytest.raises(ValueError, match="num_envs"):
        hybrid.set_num_envs(8)
    with pytest.raises(ValueError, match="names must differ"):
        Hybrid([Count(space), Count(space)])


# ----------------------------------------------------------------------------- make
def test_make_builds_single_modules_and_hybrids_by_name():
    obs_space, act_space = spaces.Box(-1.0, 1.0, (4,)), spaces.Discrete(2)
    assert isinstance(intrinsic.make("rnd", obs_space, act_space), RND)
    module = intrinsic.make(
        "rnd, count, surprise",
        obs_space,
        act_space,
        fusion="max",
        num_envs=2,
        seed=0,
        device="cpu",
        options={"count": {"beta": 0.1}},
    )
    assert isinstance(module, Hybrid) and module.fusion == "max"
    assert [m.name for m in module.parts] == ["rnd", "count", "surprise"]
    assert module.parts[1].beta == 0.1 and module.num_envs == 2
    obs = torch.rand(6, 4)
    assert module.compute(obs, torch.zeros(6, dtype=torch.long), obs).shape == (6,)
    with pytest.raises(ValueError, match="unknown intrinsic"):
        intrinsic.make("curiosity", obs_space, act_space)
    assert set(intrinsic.registered()) >= {"rnd", "count", "surprise"}


def test_modules_move_with_to():
    module = intrinsic.make(
        "rnd,count,surprise", spaces.Box(-1.0, 1.0, (4,)), spaces.Discrete(2)
    ).to("cpu")
    assert module.device == torch.device("cpu")
    obs = torch.rand(3, 4)
    assert module.compute(obs, torch.zeros(3, dtype=torch.long), obs).device == torch.device("cpu")


# ------------------------------------------------------------------------ bad input
def all_modules(space: spaces.Space) -> list[IntrinsicModule]:
    return [RND(space, seed=0), Count(space), Surprise(space, spaces.Discrete(2), seed=0)]


@pytest.mark.parametrize("make_module", [RND, Count, lambda s: Surprise(s, spaces.Discrete(2))])
def test_unsupported_observation_spaces_are_named(make_module):
    space = spaces.Dict({"a": spaces.Discrete(2)})
    with pytest.raises(ValueError, match=r"observation space Dict\('a': Discrete\(2\)\)"):
        make_module(space)


def test_unsupported_action_spaces_are_named():
    with pytest.raises(ValueError, match="action space Text"):
        Surprise(spaces.Discrete(2), spaces.Text(5))


@pytest.mark.parametrize("where", ["obs", "next_obs"])
def test_nan_in_inputs_is_an_error(where):
    for module in all_modules(spaces.Box(-np.inf, np.inf, (2,))):
        inputs = {
            "obs": torch.zeros(3, 2),
            "actions": torch.zeros(3, dtype=torch.long),
            "next_obs": torch.ones(3, 2),
        }
        inputs[where][1, 0] = float("nan")
        with pytest.raises(ValueError, match="NaN"):
            module.compute(**inputs)
        with pytest.raises(ValueError, match="NaN"):
            module.update(**inputs) if not isinstance(module, Count) else module.compute(**inputs)


def test_batches_of_different_sizes_or_shapes_are_refused():
    rnd = RND(spaces.Box(-1.0, 1.0, (2,)), seed=0)
    with pytest.raises(ValueError, match="batch sizes differ"):
        rnd.compute(torch.zeros(3, 2), torch.zeros(2), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="does not fit"):
        rnd.compute(torch.zeros(3, 5), torch.zeros(3), torch.zeros(3, 5))
    with pytest.raises(ValueError, match="not a multiple"):
        RND(spaces.Box(-1.0, 1.0, (2,)), num_envs=2).compute(
            torch.zeros(3, 2), torch.zeros(3), torch.zeros(3, 2)
        )
