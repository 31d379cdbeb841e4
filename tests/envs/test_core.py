"""The batched-env contract (docs/batched_envs.md): API, autoreset, seeding, errors, wrappers."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
import torch

from rewardlab import envs
from rewardlab.envs import BatchedEnv, BatchedWrapper
from rewardlab.envs.core import carried_steps


def test_registry_lists_the_classic_envs() -> None:
    assert {"CartPole-v1"} <= set(envs.registered())
    assert envs.registered() == sorted(envs.registered())


def test_register_rejects_a_taken_id() -> None:
    with pytest.raises(ValueError, match="already registered"):
        envs.register("CartPole-v1", envs.CartPoleEnv)


def test_reset_and_step_follow_the_contract() -> None:
    env = envs.make("CartPole-v1", 32, seed=0)
    obs, info = env.reset()
    assert isinstance(env, BatchedEnv)
    assert obs.shape == (32, 4) and obs.dtype == torch.float32 and obs.device == env.device
    assert info == {}
    obs, reward, terminated, truncated, info = env.step(torch.zeros(32, dtype=torch.int64))
    assert obs.shape == (32, 4) and obs.dtype == torch.float32
    assert reward.shape == (32,) and reward.dtype == torch.float32
    assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
    assert info["final_obs"].shape == obs.shape
    assert set(info["reward_components"]) == {"extrinsic"}
    assert torch.equal(info["reward_components"]["extrinsic"], reward)


def test_same_step_autoreset_reports_the_final_observation() -> None:
    env = envs.make("CartPole-v1", 64, seed=1)
    env.reset()
    pushes = torch.ones(64, dtype=torch.int64)
    for _ in range(100):
        obs, _, terminated, truncated, info = env.step(pushes)
        done = terminated | truncated
        if done.any():
            break
    assert done.any()
    final = info["final_obs"]
    # Ended envs: the final observation is outside the termination box, the new one is a
    # fresh reset state; the other envs' rows are equal.
    assert (final[done].abs()[:, [0, 2]] > torch.tensor([2.4, 0.2094])).any(dim=1).all()
    assert obs[done].abs().max() <= 0.05
    assert torch.equal(final[~done], obs[~done])
    assert torch.equal(env.state, obs)


def test_same_seed_gives_the_same_trajectories() -> None:
    def rollout(env: BatchedEnv) -> list[torch.Tensor]:
        obs, _ = env.reset()
        observations = [obs]
        actions = torch.Generator().manual_seed(0)
        for _ in range(300):
            obs, *_ = env.step(torch.randint(0, 2, (16,), generator=actions))
            observations.append(obs)
        return observations

    first = rollout(envs.make("CartPole-v1", 16, seed=7))
    second = rollout(envs.make("CartPole-v1", 16, seed=7))
    other = rollout(envs.make("CartPole-v1", 16, seed=8))
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first[0], other[0])

    env = envs.make("CartPole-v1", 16)
    env.reset(seed=7)
    assert torch.equal(env.state, first[0])


def test_reset_without_seed_continues_the_stream() -> None:
    env = envs.make("CartPole-v1", 4, seed=0)
    first, _ = env.reset()
    second, _ = env.reset()
    assert not torch.equal(first, second)


def test_numpy_actions_are_accepted() -> None:
    env = envs.make("CartPole-v1", 4, seed=0)
    env.reset()
    obs, *_ = env.step(np.array([0, 1, 0, 1]))
    assert obs.shape == (4, 4)
    obs, *_ = env.step(env.action_space.sample())
    assert obs.shape == (4, 4)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "MountainCar-v0", "Acrobot-v1"])
def test_observations_are_not_the_env_state(env_id: str) -> None:
    """The observation of CartPole and MountainCar is their state's transpose, a view in
    eager mode: what reset and step hand out must be copies all the same."""
    env = envs.make(env_id, 4, seed=0)
    obs, _ = env.reset()
    before = env.state.clone()
    obs += 1.0
    assert torch.equal(env.state, before)
    actions = torch.zeros(4, dtype=torch.int64)
    twin = envs.make(env_id, 4, seed=0)
    twin.reset()
    for _ in range(3):
        obs, _, _, _, info = env.step(actions)
        obs += 1.0
        info["final_obs"] += 1.0
        twin.step(actions)
    assert torch.equal(env.state, twin.state)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"env_id": "CartPole-v9"}, ValueError, r"unknown env 'CartPole-v9': Gymnasium cannot make it.*CartPole-v1"),
        ({"num_envs": 0}, ValueError, "num_envs must be at least 1, got 0"),
        ({"num_envs": 2.0}, TypeError, "num_envs must be an int"),
        ({"device": "tpu"}, ValueError, "device='tpu'"),
        ({"max_episode_steps": 0}, ValueError, "max_episode_steps must be a positive int"),
    ],
)
def test_make_rejects_bad_arguments(kwargs: dict, error: type, match: str) -> None:
    arguments = {"env_id": "CartPole-v1", "num_envs": 2, **kwargs}
    with pytest.raises(error, match=match):
        envs.make(arguments.pop("env_id"), arguments.pop("num_envs"), **arguments)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_make_names_a_missing_cuda_device() -> None:
    with pytest.raises(ValueError, match="CUDA is not available.*device='cpu'"):
        envs.make("CartPole-v1", 2, device="cuda")


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        (torch.zeros(3, dtype=torch.int64), ValueError, r"shape \(3,\).*takes shape \(4,\)"),
        (torch.zeros(4, 1, dtype=torch.int64), ValueError, r"shape \(4, 1\)"),
        (torch.zeros(4), TypeError, "must be integers, got dtype torch.float32"),
        (torch.tensor([0, 1, 2, 0]), ValueError, r"action 2 of env 2 is outside.*\[0, 1\]"),
        (np.array([0, -1, 0, 0]), ValueError, r"action -1 of env 1"),
        ([0, 1, 0, 1], TypeError, "must be a torch.Tensor or numpy array, got list"),
    ],
)
def test_step_rejects_bad_actions_and_keeps_the_state(actions, error: type, match: str) -> None:
    env = envs.make("CartPole-v1", 4, seed=0)
    env.reset()
    state = env.state.clone()
    with pytest.raises(error, match=match):
        env.step(actions)
    assert torch.equal(env.state, state)


def test_box_actions_must_be_floats() -> None:
    env = envs.make("Pendulum-v1", 2, seed=0)
    env.reset()
    with pytest.raises(TypeError, match="must be floats, got dtype torch.int64"):
        env.step(torch.zeros(2, 1, dtype=torch.int64))


def test_step_before_reset_says_to_reset() -> None:
    env = envs.make("CartPole-v1", 2)
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(torch.zeros(2, dtype=torch.int64))


class ScaleReward(BatchedWrapper):
    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        components = {**info["reward_components"], "scaled": 0.5 * reward}
        return obs, 1.5 * reward, terminated, truncated, {**info, "reward_components": components}


def test_wrapper_forwards_what_it_does_not_override() -> None:
    env = envs.make("CartPole-v1", 4, seed=0)
    wrapped = ScaleReward(env)
    assert wrapped.num_envs == 4 and wrapped.device == env.device
    assert wrapped.single_action_space == env.single_action_space
    assert wrapped.unwrapped is env and wrapped.spec_id == "CartPole-v1"
    wrapped.reset(seed=0)
    _, reward, _, _, info = wrapped.step(torch.zeros(4, dtype=torch.int64))
    assert torch.equal(reward, torch.full((4,), 1.5))
    assert set(info["reward_components"]) == {"extrinsic", "scaled"}
    with pytest.raises(AttributeError):
        _ = wrapped.no_such_attribute


class Bonus(BatchedWrapper):
    """A wrapper that writes only its carried step: its step is BatchedWrapper's."""

    @property
    def component_names(self):
        return (*self.carried_env.component_names, "bonus")

    def advance_carried(self, carry, actions, fresh):
        carry, (obs, reward, terminated, truncated, done, final_obs), components = (
            self.carried_env.advance_carried(carry, actions, fresh)
        )
        bonus = 0.5 * final_obs[:, 0]
        return carry, (obs, reward + bonus, terminated, truncated, done, final_obs), (*components, bonus)


class CartPoleOwnStep(envs.CartPoleEnv):
    """CartPole with a step of its own, so a wrapper steps it through its step."""

    def step(self, actions):
        return super().step(actions)


@pytest.mark.parametrize("own_step", [False, True])
def test_a_wrapper_that_writes_advance_carried_steps_as_the_env_does(own_step: bool) -> None:
    bare = envs.make("CartPole-v1", 8, seed=3)
    inner = CartPoleOwnStep(8, seed=3) if own_step else envs.make("CartPole-v1", 8, seed=3)
    wrapped = Bonus(inner)
    bare.reset()
    wrapped.reset()
    rng = torch.Generator().manual_seed(1)
    ended = 0
    for _ in range(60):
        actions = torch.randint(0, 2, (8,), generator=rng)
        obs, reward, terminated, truncated, info = bare.step(actions)
        got_obs, got_reward, got_terminated, got_truncated, got_info = wrapped.step(actions)
        assert torch.equal(got_obs, obs) and torch.equal(got_info["final_obs"], info["final_obs"])
        assert torch.equal(got_terminated, terminated) and torch.equal(got_truncated, truncated)
        bonus = 0.5 * info["final_obs"][:, 0]
        assert torch.equal(got_reward, reward + bonus)
        assert list(got_info["reward_components"]) == ["extrinsic", "bonus"]
        assert torch.equal(got_info["reward_components"]["bonus"], bonus)
        ended += int((terminated | truncated).sum())
    assert ended > 0  # the autoresets took the same reset states
    state = inner.state.clone()
    with pytest.raises(ValueError, match=r"action 2 of env 0 is outside"):
        wrapped.step(torch.full((8,), 2))
    assert torch.equal(inner.state, state)


class ThreadsSeen(envs.CartPoleEnv):
    """CartPole that records torch's thread count at each transition (a user's own env)."""

    seen: list[int]

    def transition(self, state, actions):
        self.seen.append(torch.get_num_threads())
        return super().transition(state, actions)


class ThreadsSeenOwnStep(ThreadsSeen):
    """The same with a step of its own, as the batched MiniGrid's and a user's may be."""

    def step(self, actions):
        self.seen.append(torch.get_num_threads())
        return super().step(actions)


@pytest.fixture
def users_threads() -> Any:
    """torch at two threads, as a user of the Python API may have it; the session's after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(threads)


@pytest.mark.parametrize("kind", [ThreadsSeen, ThreadsSeenOwnStep])
def test_steps_run_at_the_envs_threads_and_give_the_users_back(kind: type, users_threads: int) -> None:
    env = kind(4, seed=0)
    env.seen = []
    wrapped = ScaleReward(env)
    wrapped.reset()
    assert torch.get_num_threads() == users_threads
    wrapped.step(torch.ones(4, dtype=torch.int64))
    assert set(env.seen) == {1} and torch.get_num_threads() == users_threads
    with pytest.raises(ValueError, match="outside"):
        wrapped.step(torch.full((4,), 2))
    assert torch.get_num_threads() == users_threads  # restored when the step raises too
    wrapped.threads = None  # a wrapper's setting is its env's
    assert env.threads is None
    env.seen = []
    wrapped.step(torch.ones(4, dtype=torch.int64))
    assert set(env.seen) == {users_threads}
    with pytest.raises(ValueError, match=r"threads=0 is not a thread count"):
        env.threads = 0


def test_the_threads_setting_is_not_part_of_the_compiled_step() -> None:
    env = envs.make("CartPole-v1", 4)
    fingerprint = env.step_fingerprint()
    env.threads = 2
    assert env.step_fingerprint() == fingerprint


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_env_leaves_torchs_threads_alone(users_threads: int) -> None:
    env = ThreadsSeen(4, device="cuda", seed=0)
    env.seen = []
    env.reset()
    env.step(torch.ones(4, dtype=torch.int64, device="cuda"))
    assert set(env.seen) == {users_threads} and torch.get_num_threads() == users_threads


def test_render_draws_the_chosen_copy_with_gymnasiums_renderer() -> None:
    env = envs.make("CartPole-v1", 2, seed=0)
    env.reset()
    frame = env.render(index=1)
    assert frame.shape == (400, 600, 3) and frame.dtype == np.uint8
    with pytest.raises(ValueError, match="index=2"):
        env.render(index=2)
    env.close()


@pytest.mark.inductor
@pytest.mark.parametrize("env_id", ["CartPole-v1"])
def test_compiled_step_matches_the_eager_one(env_id: str) -> None:
    eager = envs.make(env_id, 64, seed=9)
    compiled = envs.make(env_id, 64, seed=9, compile=True)
    eager.reset()
    compiled.reset()
    rng = torch.Generator().manual_seed(0)
    for _ in range(40):
        actions = torch.randint(0, 2, (64,), generator=rng)
        expected = eager.step(actions)
        got = compiled.step(actions)
        for a, b in zip(expected[:4], got[:4], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_confined_process_not_handed_the_compiled_step_runs_it_eagerly(monkeypatch) -> None:
    from rewardlab.common import compiled

    monkeypatch.setattr(compiled, "_LOADED", {})
    monkeypatch.setattr(compiled, "_LOADED_ONLY", True)  # as in a sandboxed worker
    env = envs.make("CartPole-v1", 8, seed=3, compile=True)
    eager = envs.make("CartPole-v1", 8, seed=3)
    env.reset()
    eager.reset()
    actions = torch.ones(8, dtype=torch.long)
    got, expected = env.step(actions), eager.step(actions)
    assert not env.compile  # it did not read the cache, and fell back
    for a, b in zip(expected[:4], got[:4], strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_cuda_env_steps_like_the_cpu_one(env_id: str) -> None:
    cpu = envs.make(env_id, 256, seed=0)
    cuda = envs.make(env_id, 256, device="cuda", seed=0)
    cpu.reset()
    cuda.reset()
    cuda._state.copy_(cpu._state)
    space = cpu.single_action_space
    for _ in range(20):
        actions = torch.as_tensor(cpu.action_space.sample())
        if isinstance(space, envs.core.spaces.Box):
            actions = actions.float()
        expected = cpu.step(actions)
        got = cuda.step(actions.cuda())
        assert got[0].device.type == "cuda" and got[1].device.type == "cuda"
        torch.testing.assert_close(got[4]["final_obs"].cpu(), expected[4]["final_obs"])
        cuda._state.copy_(cpu._state)


@pytest.mark.parametrize("traced", [False, True])  # a learner's eager steps, or traced ones
@pytest.mark.parametrize("steps", [5, 24])  # within the pool, and more than it holds (16)
def test_carried_steps_committed_equal_steps_of_step(steps: int, traced: bool) -> None:
    """A learner that runs the env's steps in its own code (PPO's rollout) takes the reset
    states ahead, runs ``advance_carried`` on the carry and commits: the same episodes as
    ``step`` gives after the same ``reset_states_ahead`` calls, over episode ends and pool
    refills, in the eager form and in the form a learner traces."""
    stepped = envs.make("CartPole-v1", 8, seed=4, max_episode_steps=7)
    carried = envs.make("CartPole-v1", 8, seed=4, max_episode_steps=7)
    stepped.reset()
    carried.reset()
    rng = torch.Generator().manual_seed(1)
    ended = 0
    for _ in range(4):
        stepped.reset_states_ahead(steps)
        fresh = carried.reset_states_ahead(steps)
        assert fresh.shape == (4, steps * 8)
        carry = carried.carried()
        done = []
        for t in range(steps):
            actions = torch.randint(0, 2, (8,), generator=rng)
            expected = stepped.step(actions)
            with carried.traced_steps() if traced else contextlib.nullcontext():
                carry, step, components = carried.advance_carried(
                    carry, actions, fresh[:, t * 8 : (t + 1) * 8]
                )
            obs, reward, terminated, truncated, done_t, final_obs = step
            got = (obs, reward, terminated, truncated, final_obs)
            for a, b in zip((*expected[:4], expected[4]["final_obs"]), got, strict=True):
                torch.testing.assert_close(b, a)
            assert components == (reward,)
            done.append(done_t)
            ended += int(done_t.sum())
        carried.commit_carried(carry, torch.stack(done), actions)
        assert torch.equal(carried.state, stepped.state)
    assert ended > 8  # episodes ended, some of them at the time limit
    # then step() goes on from the committed state and pool as the stepped env does
    actions = torch.ones(8, dtype=torch.int64)
    torch.testing.assert_close(carried.step(actions)[0], stepped.step(actions)[0])


def test_commit_carried_refuses_more_steps_than_were_taken_ahead() -> None:
    env = envs.make("CartPole-v1", 4, seed=0)
    env.reset()
    fresh = env.reset_states_ahead(3)
    carry = env.carried()
    actions = torch.zeros(4, dtype=torch.int64)
    for t in range(3):
        carry, *_ = env.advance_carried(carry, actions, fresh[:, t * 4 : (t + 1) * 4])
    env.commit_carried(carry, torch.zeros((3, 4), dtype=torch.bool), actions)
    with pytest.raises(ValueError, match="reset_states_ahead"):
        env.commit_carried(carry, torch.zeros((14, 4), dtype=torch.bool), actions)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        env.reset_states_ahead(0)


def test_a_learners_carried_step_does_not_check_the_actions_and_step_does() -> None:
    """Out of :meth:`step` the carried step is the formula alone (a learner's actions come
    from its policy); within it, the actions' range is checked before anything changes."""
    env = envs.make("CartPole-v1", 4, seed=0)
    env.reset()
    bad = torch.full((4,), 2)
    env.advance_carried(env.carried(), bad, env.reset_states_ahead(1))
    state = env.state.clone()
    with pytest.raises(ValueError, match=r"action 2 of env 0 is outside"):
        env.step(bad)
    assert torch.equal(env.state, state)


def test_the_step_fingerprint_follows_the_constants_and_not_the_run_state() -> None:
    first = envs.make("CartPole-v1", 4, seed=0)
    fingerprint = first.step_fingerprint()
    first.reset()
    first.step(torch.ones(4, dtype=torch.int64))
    assert first.step_fingerprint() == fingerprint  # stepping changes the state, not the step
    assert envs.make("CartPole-v1", 4, seed=5).step_fingerprint() == fingerprint
    assert envs.make("CartPole-v1", 4, max_episode_steps=9).step_fingerprint() != fingerprint
    assert envs.make("CartPole-v1", 8).step_fingerprint() != fingerprint
    assert envs.make("DeepSea-v0", 4, size=6).step_fingerprint() != envs.make("DeepSea-v0", 4, size=7).step_fingerprint()


def test_a_learner_runs_an_envs_carried_step_where_its_step_is_it() -> None:
    """``carried_steps`` is the env itself where its step is ``advance_carried``, else an
    adapter of its step; ``advance_traces`` says whether the step is known to trace."""
    from rewardlab.envs.classic.cartpole import CartPoleEnv

    class UsersCartPole(CartPoleEnv):  # defined outside rewardlab
        pass

    ours = envs.make("CartPole-v1", 4)
    assert carried_steps(ours) is ours and ours.advance_traces
    fruit = envs.make("FruitCollection-v0", 4)  # its step adds components
    assert carried_steps(fruit) is not fruit
    users = UsersCartPole(4)
    assert carried_steps(users) is users and not users.advance_traces
    assert UsersCartPole(4, compile=True).advance_traces  # its user compiles its step
    shaped = Bonus(ours)  # a wrapper's own advance_carried is not assumed to trace
    assert carried_steps(shaped) is not shaped


def test_the_adapted_step_runs_the_envs_own_step() -> None:
    """An env with a step of its own, through ``carried_steps``: each carried step is one
    ``step``, with its reward components named at the first."""
    own, bare = CartPoleOwnStep(4, seed=2), envs.make("CartPole-v1", 4, seed=2)
    own.reset()
    bare.reset()
    steps = carried_steps(own)
    assert steps.carried() == () and steps.reset_states_ahead(3).shape == (0, 12)
    actions = torch.ones(4, dtype=torch.int64)
    carry, step, components = steps.advance_carried((), actions, steps.reset_states_ahead(1))
    obs, reward, terminated, truncated, done, final_obs = step
    expected = bare.step(actions)
    assert carry == () and steps.component_names == ("extrinsic",)
    assert torch.equal(obs, expected[0]) and components == (reward,)
    assert torch.equal(done, expected[2] | expected[3])
