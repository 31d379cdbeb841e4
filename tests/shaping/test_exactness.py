"""Exactness of potential-based shaping at episode ends, for every wrapper kind.

An episode's discounted shaping sum must telescope: ``-phi(s0)`` when it
terminates and ``gamma**T * phi(s_T) - phi(s0)`` when it is truncated, under
next-step and same-step autoreset alike.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st
from stable_baselines3.common.vec_env import DummyVecEnv

from rewardlab.shaping import (
    BatchedPotentialShaping,
    PotentialShaping,
    PotentialShapingVector,
    VecPotentialShaping,
)


def phi(obs):
    """A nonlinear potential for numpy and torch batches."""
    if isinstance(obs, torch.Tensor):
        return torch.sin(3 * obs[:, 0]) + 2 * obs[:, 0] ** 2 - 0.5
    return np.sin(3 * obs[:, 0]) + 2 * obs[:, 0] ** 2 - 0.5


class ScriptedEpisodes(gym.Env):
    """Episodes of scripted lengths that terminate or are truncated; logs every observation."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, script: list[tuple[int, bool]]):
        self.script = script
        self.episodes: list[tuple[list[float], bool]] = []

    def _observe(self) -> np.ndarray:
        return self.np_random.uniform(-1, 1, size=1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        length, terminates = self.script[len(self.episodes) % len(self.script)]
        self.length, self.terminates, self.t = length, terminates, 0
        obs = self._observe()
        self.episodes.append(([float(obs[0])], terminates))
        return obs, {}

    def step(self, action):
        self.t += 1
        obs = self._observe()
        self.episodes[-1][0].append(float(obs[0]))
        done = self.t >= self.length
        return obs, 1.0, done and self.terminates, done and not self.terminates, {}


class TupleObservations(gym.ObservationWrapper):
    """The scripted observation as the first part of a ``Tuple(Box, Discrete)`` observation."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = gym.spaces.Tuple((env.observation_space, gym.spaces.Discrete(3)))

    def observation(self, obs):
        return obs, 2


def tuple_phi(obs):
    """``phi`` of the Box part of a batch of ``Tuple(Box, Discrete)`` observations."""
    box, index = obs
    assert index.shape == (len(box),) and (index == 2).all()
    return phi(box)


def expected_sum(observations: list[float], terminated: bool, gamma: float, scale: float) -> float:
    values = phi(np.array(observations)[:, None])
    if terminated:
        return -scale * values[0]
    return scale * (gamma ** (len(observations) - 1) * values[-1] - values[0])


def discounted(terms: list[float], gamma: float) -> float:
    return sum(gamma**k * f for k, f in enumerate(terms))


scripts = st.lists(
    st.tuples(st.integers(1, 6), st.booleans()), min_size=1, max_size=4
)
gammas = st.floats(0.5, 1.0)
scales = st.floats(0.1, 3.0)


def check_episodes(per_env_terms: list[list[list[float]]], logs, gamma, scale) -> int:
    """Compare every finished episode's discounted shaping with the telescoped value."""
    checked = 0
    for finished, log in zip(per_env_terms, logs):
        for terms, (observations, terminated) in zip(finished, log):
            assert len(terms) == len(observations) - 1
            assert discounted(terms, gamma) == pytest.approx(
                expected_sum(observations, terminated, gamma, scale), abs=1e-9
            )
            checked += 1
    return checked


@pytest.mark.parametrize("tuples", [False, True], ids=["box", "tuple"])
@settings(max_examples=25, deadline=None)
@given(script=scripts, gamma=gammas, scale=scales, seed=st.integers(0, 1000))
def test_single_env_telescopes(tuples, script, gamma, scale, seed):
    base = ScriptedEpisodes(script)
    if tuples:
        env = PotentialShaping(TupleObservations(base), tuple_phi, gamma=gamma, scale=scale)
    else:
        env = PotentialShaping(base, phi, gamma=gamma, scale=scale)
    finished: list[list[float]] = []
    env.reset(seed=seed)
    terms: list[float] = []
    for _ in range(30):
        _, reward, terminated, truncated, info = env.step(0)
        terms.append(info["reward_components"]["shaping"])
        assert reward == pytest.approx(1.0 + terms[-1])
        assert info["reward_components"]["extrinsic"] == 1.0
        if terminated or truncated:
            finished.append(terms)
            terms = []
            env.reset()
    assert check_episodes([finished], [base.episodes], gamma, scale) == len(finished) > 0


@pytest.mark.parametrize("tuples", [False, True], ids=["box", "tuple"])
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@settings(max_examples=20, deadline=None)
@given(scripts_per_env=st.lists(scripts, min_size=1, max_size=3), gamma=gammas, scale=scales)
def test_gymnasium_vector_telescopes(mode, tuples, scripts_per_env, gamma, scale):
    bases = [ScriptedEpisodes(script) for script in scripts_per_env]
    wrap = TupleObservations if tuples else (lambda b: b)
    vector = SyncVectorEnv([lambda b=b: wrap(b) for b in bases], autoreset_mode=mode)
    env = PotentialShapingVector(vector, tuple_phi if tuples else phi, gamma=gamma, scale=scale)
    n = len(bases)
    env.reset(seed=0)
    finished: list[list[list[float]]] = [[] for _ in range(n)]
    current: list[list[float]] = [[] for _ in range(n)]
    was_done = np.zeros(n, bool)
    for _ in range(30):
        _, rewards, terminated, truncated, info = env.step(np.zeros(n, dtype=int))
        shaping = info["reward_components"]["shaping"]
        np.testing.assert_allclose(rewards, info["reward_components"]["extrinsic"] + shaping)
        for i in range(n):
            if mode is AutoresetMode.NEXT_STEP and was_done[i]:
                assert shaping[i] == 0.0, "the reset step of next-step autoreset gets F = 0"
                continue
            current[i].append(float(shaping[i]))
            if terminated[i] or truncated[i]:
                finished[i].append(current[i])
                current[i] = []
        was_done = terminated | truncated
    assert check_episodes(finished, [b.episodes for b in bases], gamma, scale) > 0


@settings(max_examples=20, deadline=None)
@given(scripts_per_env=st.lists(scripts, min_size=1, max_size=3), gamma=gammas, scale=scales)
def test_sb3_vec_env_telescopes(scripts_per_env, gamma, scale):
    bases = [ScriptedEpisodes(script) for script in scripts_per_env]
    env = VecPotentialShaping(DummyVecEnv([lambda b=b: b for b in bases]), phi, gamma, scale)
    n = len(bases)
    env.seed(0)
    env.reset()
    finished: list[list[list[float]]] = [[] for _ in range(n)]
    current: list[list[float]] = [[] for _ in range(n)]
    for _ in range(30):
        _, rewards, dones, infos = env.step(np.zeros(n, dtype=int))
        for i in range(n):
            components = infos[i]["reward_components"]
            assert rewards[i] == pytest.approx(components["extrinsic"] + components["shaping"], abs=1e-5)
            current[i].append(components["shaping"])
            if dones[i]:
                finished[i].append(current[i])
                current[i] = []
    assert check_episodes(finished, [b.episodes for b in bases], gamma, scale) > 0


class ScriptedBatch:
    """A batched torch env after the batched-env contract, built from scripted envs."""

    def __init__(self, bases: list[ScriptedEpisodes]):
        self.bases = bases
        self.num_envs = len(bases)
        self.device = torch.device("cpu")

    def reset(self, seed=None, options=None):
        obs = [b.reset(seed=None if seed is None else seed + i)[0] for i, b in enumerate(self.bases)]
        return torch.tensor(np.stack(obs)), {}

    def step(self, actions):
        obs, final, terminated, truncated = [], [], [], []
        for base in self.bases:
            o, _, term, trunc, _ = base.step(0)
            final.append(o)
            if term or trunc:
                o, _ = base.reset()
            obs.append(o)
            terminated.append(term)
            truncated.append(trunc)
        reward = torch.ones(self.num_envs, dtype=torch.float64)
        info = {"final_obs": torch.tensor(np.stack(final)), "reward_components": {"extrinsic": reward}}
        return torch.tensor(np.stack(obs)), reward, torch.tensor(terminated), torch.tensor(truncated), info


@settings(max_examples=20, deadline=None)
@given(scripts_per_env=st.lists(scripts, min_size=1, max_size=3), gamma=gammas, scale=scales)
def test_batched_torch_telescopes(scripts_per_env, gamma, scale):
    bases = [ScriptedEpisodes(script) for script in scripts_per_env]
    env = BatchedPotentialShaping(ScriptedBatch(bases), phi, gamma=gamma, scale=scale)
    n = len(bases)
    env.reset(seed=0)
    finished: list[list[list[float]]] = [[] for _ in range(n)]
    current: list[list[float]] = [[] for _ in range(n)]
    for _ in range(30):
        _, reward, terminated, truncated, info = env.step(torch.zeros(n, dtype=torch.int64))
        shaping = info["reward_components"]["shaping"]
        assert isinstance(shaping, torch.Tensor) and shaping.shape == (n,)
        assert torch.equal(info["reward_components"]["extrinsic"], torch.ones(n, dtype=torch.float64))
        for i in range(n):
            current[i].append(float(shaping[i]))
            if terminated[i] or truncated[i]:
                finished[i].append(current[i])
                current[i] = []
    # float64 potentials on float64 observations: the sums are exact to rounding.
    assert check_episodes(finished, [b.episodes for b in bases], gamma, scale) > 0
