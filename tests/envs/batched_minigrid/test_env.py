"""The batched MiniGrid against MiniGrid itself: the same state and actions give the same
observation, reward, terminated and truncated, step for step."""

from __future__ import annotations

import time
import warnings
from collections import Counter

import gymnasium
import numpy as np
import pytest
import torch

pytest.importorskip("minigrid")

from minigrid.core.constants import DIR_TO_VEC  # noqa: E402
from minigrid.core.world_object import Ball, Box, Door, Key  # noqa: E402
from minigrid.envs import MultiRoomEnv  # noqa: E402
from user_envs import write_key_rooms  # noqa: E402

from rewardlab import envs  # noqa: E402
from rewardlab.envs import minigrid as minigrid_helpers  # noqa: E402
from rewardlab.envs.batched_minigrid import BATCHED_IDS, BatchedMiniGridEnv, layouts  # noqa: E402
from rewardlab.envs.batched_minigrid.env import view_offsets  # noqa: E402
from rewardlab.envs.gymnasium_env import GymnasiumBatchedEnv  # noqa: E402
from rewardlab.envs.minigrid import register_multiroom_tasks  # noqa: E402

COPIES = 6
STEPS = 160


@pytest.fixture(scope="module")
def key_rooms(tmp_path_factory):
    """The id of a user's own MiniGridEnv subclass (three rooms, a key, a locked door, the
    goal), ``batched_key_rooms:MiniGrid-KeyRooms-v0``, in a folder on the import path."""
    folder = tmp_path_factory.mktemp("user_minigrid")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(folder))
        yield write_key_rooms(folder, "batched_key_rooms")


def seeking_action(source, rng: np.random.Generator) -> int:
    """An action that often does something to the cell in front: pick up what can be picked,
    toggle doors and boxes, drop in front of empty cells, walk into lava and goals; random
    otherwise (all seven actions, ``done`` included)."""
    cell = source.grid.get(*source.front_pos)
    roll = rng.random()
    if roll < 0.35:
        return int(rng.integers(7))
    if cell is None:
        if source.carrying is not None and roll < 0.45:
            return 4
        return 2 if roll < 0.8 else int(rng.integers(2))
    if cell.type in ("key", "ball", "box") and source.carrying is None and roll < 0.8:
        return 3
    if cell.type in ("door", "box") and roll < 0.8:
        return 5
    if cell.type in ("goal", "lava", "door") and roll < 0.9:
        return 2
    return int(rng.integers(2))


def run_parity(
    env_id: str, seed: int, max_steps: int | None = None, arrange=None, **env_kwargs
) -> Counter:
    """Step ``COPIES`` MiniGrid envs and one batched env of as many copies side by side from
    the same states, asserting equality at every step; returns what the steps did.
    ``arrange(source, rng)``, where given, changes each MiniGrid episode's start before it is
    copied (to start where a random walk seldom gets); ``env_kwargs`` go to the task's
    constructor (a user's ``room_size``)."""
    kwargs = {} if max_steps is None else {"max_steps": max_steps}
    sources = [gymnasium.make(env_id, **kwargs, **env_kwargs).unwrapped for _ in range(COPIES)]
    batched = BatchedMiniGridEnv(
        COPIES, env_id=env_id, layouts=4, seed=seed, max_episode_steps=max_steps, **env_kwargs
    )
    batched.reset()
    rng = np.random.default_rng(seed)
    done = Counter()
    episode_seed = seed * 1000
    for index, source in enumerate(sources):
        source.reset(seed=episode_seed + index)
        if arrange is not None:
            arrange(source, rng)
        batched.read_gymnasium_state(source, index)
    episode_seed += COPIES
    start = batched.observe(batched.state)
    expected = np.stack([source.gen_obs()["image"].reshape(-1) for source in sources])
    np.testing.assert_array_equal(start.numpy(), expected)
    for step in range(STEPS):
        actions = [seeking_action(source, rng) for source in sources]
        before = [
            (source.carrying, source.grid.get(*source.front_pos)) for source in sources
        ]
        locked = [getattr(front, "is_locked", False) for _, front in before]
        results = [source.step(action) for source, action in zip(sources, actions)]
        obs, reward, terminated, truncated, info = batched.step(torch.tensor(actions))
        final = torch.where(
            (terminated | truncated)[:, None], info["final_obs"], obs
        ).numpy()
        for index, (mg_obs, mg_reward, mg_terminated, mg_truncated, _) in enumerate(results):
            where = f"{env_id} copy {index} step {step} action {actions[index]}"
            np.testing.assert_array_equal(final[index], mg_obs["image"].reshape(-1), err_msg=where)
            assert reward[index].item() == np.float32(mg_reward), where
            assert bool(terminated[index]) == mg_terminated, where
            assert bool(truncated[index]) == mg_truncated, where
            carried, front = before[index]
            action = actions[index]
            source = sources[index]
            if action == 3 and carried is None and source.carrying is not None:
                done[f"pickup {source.carrying.type}"] += 1
            if action == 4 and carried is not None and source.carrying is None:
                done["drop"] += 1
            if action == 5 and front is not None and front.type == "door":
                done["unlock" if locked[index] and front.is_open else "toggle door"] += 1
            if action == 5 and isinstance(front, Box):
                done["open box" if front.contains is not None else "toggle box"] += 1
            if mg_terminated:
                done["success" if mg_reward > 0 else "lava"] += 1
            if mg_truncated:
                done["truncated"] += 1
            if mg_terminated or mg_truncated:  # a new MiniGrid episode, copied into ours
                source.reset(seed=episode_seed)
                episode_seed += 1
                if arrange is not None:
                    arrange(source, rng)
                batched.read_gymnasium_state(source, index)
        done["steps"] += COPIES
    return done


@pytest.mark.parametrize("env_id", BATCHED_IDS)
def test_steps_match_minigrid(env_id):
    done = run_parity(env_id, seed=BATCHED_IDS.index(env_id))
    assert done["steps"] == COPIES * STEPS


@pytest.mark.parametrize(
    ("env_id", "events"),
    [
        ("MiniGrid-DoorKey-5x5-v0", ("pickup key", "unlock", "drop", "success", "truncated")),
        ("MiniGrid-Unlock-v0", ("pickup key", "success")),
        ("MiniGrid-ObstructedMaze-1Dlhb-v0", ("open box", "pickup ball", "pickup key")),
        ("MiniGrid-LavaGapS5-v0", ("lava",)),
        ("MiniGrid-BlockedUnlockPickup-v0", ("pickup ball", "drop")),
    ],
)
def test_parity_covers_keys_doors_boxes_drops_and_lava(env_id, events):
    # short time limits so that truncation, too, is compared
    done = run_parity(env_id, seed=7, max_steps=40)
    missing = [event for event in events if not done[event]]
    assert not missing, f"{env_id}: the parity run never did {missing} ({dict(done)})"


def face(source, target: tuple[int, int], rng: np.random.Generator) -> bool:
    """Put the agent on an empty cell beside ``target``, facing it; False where none is free."""
    free = [
        (direction, (target[0] - dx, target[1] - dy))
        for direction, (dx, dy) in enumerate(DIR_TO_VEC)
        if 0 < target[0] - dx < source.width - 1 and 0 < target[1] - dy < source.height - 1
        and source.grid.get(target[0] - dx, target[1] - dy) is None
    ]
    if not free:
        return False
    direction, cell = free[rng.integers(len(free))]
    source.agent_pos, source.agent_dir = cell, direction
    return True


def before_a_locked_door_or_the_ball(source, rng: np.random.Generator) -> None:
    """Start before a locked door with its key in hand, or before the ball of the mission:
    what ObstructedMaze's unlocking and its success need, that a random walk seldom does."""
    if rng.random() < 0.5 and face(source, tuple(source.obj.cur_pos), rng):
        return
    doors = [
        (x, y) for x in range(source.width) for y in range(source.height)
        if isinstance(source.grid.get(x, y), Door) and source.grid.get(x, y).is_locked
    ]
    door = doors[rng.integers(len(doors))]
    if face(source, door, rng):
        source.carrying = Key(source.grid.get(*door).color)


@pytest.mark.parametrize(
    "env_id", ["MiniGrid-ObstructedMaze-2Q-v1", "MiniGrid-ObstructedMaze-Full-v0", "MiniGrid-ObstructedMaze-Full-v1"]
)
def test_obstructed_mazes_unlock_and_succeed_as_minigrid(env_id):
    done = run_parity(env_id, seed=11, arrange=before_a_locked_door_or_the_ball)
    missing = [event for event in ("unlock", "success", "pickup ball", "drop") if not done[event]]
    assert not missing, f"{env_id}: the parity run never did {missing} ({dict(done)})"


def test_noveld_multiroom_tasks_are_registered_as_noveld_makes_them_and_batched():
    for env_id, rooms, side in (
        ("MiniGrid-MultiRoom-N7-S8-v0", 7, 8),
        ("MiniGrid-MultiRoom-N10-S10-v0", 10, 10),
        ("MiniGrid-MultiRoom-N12-S10-v0", 12, 10),
    ):
        source = gymnasium.make(env_id).unwrapped
        assert type(source) is MultiRoomEnv
        assert (source.minNumRooms, source.maxNumRooms, source.maxRoomSize) == (rooms, rooms, side)
        assert (source.width, source.height, source.max_steps) == (25, 25, 20 * rooms)
        source.reset(seed=0)
        assert len(source.rooms) == rooms
    env = envs.make("MiniGrid-MultiRoom-N7-S8-v0", num_envs=4, seed=0, layouts=2)
    assert isinstance(env, BatchedMiniGridEnv) and env.max_steps == 140


def test_registering_the_multiroom_tasks_keeps_an_id_registered_before(monkeypatch):
    """A MiniGrid (or a user) that registers one of these ids first keeps its own entry."""
    theirs = gymnasium.envs.registration.EnvSpec(
        "MiniGrid-MultiRoom-N7-S8-v0", entry_point="minigrid.envs:MultiRoomEnv",
        kwargs={"minNumRooms": 2, "maxNumRooms": 2},
    )
    monkeypatch.setitem(gymnasium.registry, theirs.id, theirs)
    register_multiroom_tasks()
    assert gymnasium.registry[theirs.id] is theirs


def test_view_offsets_follow_minigrids_slice_and_rotation():
    source = gymnasium.make("MiniGrid-Empty-16x16-v0").unwrapped
    source.reset(seed=0)
    offsets = view_offsets()
    for direction in range(4):
        source.agent_pos, source.agent_dir = (8, 8), direction
        top_x, top_y, _, _ = source.get_view_exts()
        for vx in range(7):
            for vy in range(7):
                world = (8 + offsets[0, vx * 7 + vy, direction], 8 + offsets[1, vx * 7 + vy, direction])
                assert tuple(source.get_view_coords(*world)) == (vx, vy)
                assert top_x <= world[0] < top_x + 7 and top_y <= world[1] < top_y + 7


def test_make_builds_the_batched_env_and_autoresets_from_the_pool():
    env = envs.make("MiniGrid-DoorKey-5x5-v0", num_envs=64, seed=3, layouts=8, reuse=None)
    assert isinstance(env, BatchedMiniGridEnv) and env.spec_id == "MiniGrid-DoorKey-5x5-v0"
    obs, _ = env.reset()
    assert obs.shape == (64, 147) and obs.dtype == torch.float32
    assert env.single_observation_space.contains(obs[0].numpy())
    again, _ = envs.make("MiniGrid-DoorKey-5x5-v0", num_envs=64, seed=3, layouts=8, reuse=None).reset()
    assert torch.equal(obs, again)
    assert torch.equal(obs, env.observe(env.state))
    generator = torch.Generator().manual_seed(0)
    ends = 0
    for _ in range(300):
        obs, reward, terminated, truncated, info = env.step(torch.randint(7, (64,), generator=generator))
        ended = terminated | truncated
        ends += int(ended.sum())
        # a new episode starts on a layout of the pool, and obs is the view of the state
        assert torch.equal(obs, env.observe(env.state))
        for row in env.state[ended]:
            assert (env._layouts == row).all(1).any()
        assert torch.equal(info["final_obs"][~ended], obs[~ended])
    assert ends > 0


def test_a_step_that_waits_for_new_layouts_says_so_once(monkeypatch):
    """A task whose generator is slower than its episodes (MultiRoom-N12-S10) holds the step
    up at each refresh: one line says so and what to pass, and the run is what it would be."""
    make_layouts = BatchedMiniGridEnv._make_layouts

    def slow(self, source, seeds, rows):
        time.sleep(0.3)
        return make_layouts(self, source, seeds, rows)

    monkeypatch.setattr(BatchedMiniGridEnv, "_make_layouts", slow)
    monkeypatch.setattr(minigrid_helpers, "_SAID", set())  # what this process said already
    runs = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            env = BatchedMiniGridEnv(
                64, env_id="MiniGrid-Empty-5x5-v0", layouts=64, reuse=1, seed=0, max_episode_steps=1
            )
            env.reset()
            for _ in range(3):  # every step ends all 64 episodes, a refresh each
                env.step(torch.full((64,), 2))
            runs.append((env.layout_seeds.copy(), env.state.clone()))
            env.close()
    said = [w for w in caught if "waits for MiniGrid to make new layouts" in str(w.message)]
    assert len(said) == 1 and "reuse=1); pass a larger reuse, or reuse=None" in str(said[0].message)
    assert said[0].filename == __file__  # the line that stepped
    assert (runs[0][0] == runs[1][0]).all() and torch.equal(runs[0][1], runs[1][1])
    assert (runs[0][0] >= 2**31 - 1).all()  # the three refreshes replaced every layout


def test_the_pool_refreshes_from_new_seeds_deterministically():
    """Each reuse * 64 episode starts replace the 64 oldest layouts by MiniGrid's layouts of
    new seeds (above the first pools' seeds); the same seed and actions give the same run."""
    runs = []
    for _ in range(2):
        env = BatchedMiniGridEnv(256, env_id="MiniGrid-DoorKey-5x5-v0", layouts=96, reuse=2, seed=4)
        first = env.layout_seeds.copy()
        env.reset()
        generator = torch.Generator().manual_seed(0)
        starts = 0
        for _ in range(300):
            obs, _, terminated, truncated, _ = env.step(torch.randint(7, (256,), generator=generator))
            starts += int((terminated | truncated).sum())
            assert torch.equal(obs, env.observe(env.state))
        runs.append((env.layout_seeds.copy(), env._layouts.clone(), env.state.clone()))
        env.close()
    seeds, pool, state = runs[0]
    refreshed = starts // (2 * 64) * 64
    assert refreshed >= 96  # every slot was replaced at least once
    assert (seeds != first).all() and (seeds >= 2**31 - 1).all()
    assert (seeds == runs[1][0]).all() and torch.equal(pool, runs[1][1]) and torch.equal(state, runs[1][2])
    source = gymnasium.make("MiniGrid-DoorKey-5x5-v0").unwrapped
    for index in (0, 50, 95):
        source.reset(seed=int(seeds[index]))
        expected = layouts.encode_layout(source, env.rows)
        assert torch.equal(pool[index], torch.as_tensor(expected))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="layouts must be a positive int"):
        BatchedMiniGridEnv(2, env_id="MiniGrid-Empty-5x5-v0", layouts=0)
    with pytest.raises(ValueError, match="reuse must be a positive int .* got 0"):
        BatchedMiniGridEnv(2, env_id="MiniGrid-Empty-5x5-v0", layouts=1, reuse=0)
    with pytest.raises(ValueError, match="has a step of its own"):
        BatchedMiniGridEnv(2, env_id="MiniGrid-Dynamic-Obstacles-5x5-v0", layouts=1)
    with pytest.raises(ValueError, match="not a MiniGrid id"):
        BatchedMiniGridEnv(2, env_id="MiniGrid-Nowhere-v0", layouts=1)


def test_the_traced_step_is_the_eager_step():
    """compile=True compiles the graph make_fx traces from step_values: run uncompiled, that
    graph gives the eager step's values (no Python reading a tensor's value is baked in)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    env = BatchedMiniGridEnv(32, env_id="MiniGrid-ObstructedMaze-1Dlhb-v0", layouts=8, seed=0)
    env.reset()
    generator = torch.Generator().manual_seed(1)
    graph = make_fx(lambda state, elapsed, actions: env.step_values(state, elapsed, actions))(
        env.state.clone(), env._elapsed.clone(), torch.randint(7, (32,), generator=generator)
    )
    for _ in range(40):
        actions = torch.randint(7, (32,), generator=generator)
        expected = env.step_values(env.state, env._elapsed, actions)
        for value, traced in zip(expected, graph(env.state, env._elapsed, actions)):
            assert torch.equal(value, traced)
        env.step(actions)


def test_actions_are_checked_and_numpy_is_taken():
    env = envs.make("MiniGrid-Empty-5x5-v0", num_envs=3, seed=0, layouts=2)
    env.reset()
    with pytest.raises(ValueError, match="action 7 of env 1 is outside"):
        env.step(torch.tensor([0, 7, 2]))
    with pytest.raises(ValueError, match="takes shape"):
        env.step(torch.zeros(4, dtype=torch.int64))
    obs, *_ = env.step(np.array([2, 2, 2]))
    assert obs.shape == (3, 147)


def test_a_users_minigrid_task_is_batched_and_steps_as_minigrid(key_rooms):
    env = envs.make(key_rooms, num_envs=4, seed=0, layouts=8, room_size=4)
    assert isinstance(env, BatchedMiniGridEnv) and env.rows.width == 10
    done = run_parity(key_rooms, seed=5, max_steps=40, room_size=4, rooms=2)
    events = ("pickup key", "unlock", "toggle door", "success")
    missing = [event for event in events if not done[event]]
    assert not missing, f"the parity run never did {missing} ({dict(done)})"


#: the user's task small and short enough that a random policy succeeds in about 30% of episodes
KEY_ROOMS_SMALL = {"room_size": 4, "max_steps": 60}
EPISODES = 100
FRONT, HELD = (3 * 7 + 5) * 3, (3 * 7 + 6) * 3  # the view's cell in front, the agent's own


def seeking_policy(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random policy of the flat views ``(n, 147)`` that often acts on the cell in front:
    picks up keys, toggles closed doors, walks onto empty cells, open doors and the goal."""
    front, door_state, held = obs[:, FRONT], obs[:, FRONT + 2], obs[:, HELD]
    roll = rng.random(len(obs))
    actions = np.where(roll < 0.3, rng.integers(7, size=len(obs)), rng.integers(2, size=len(obs)))
    acts = roll >= 0.3
    actions = np.where(acts & (front == 5) & (held == 1), 3, actions)
    actions = np.where(acts & (front == 4) & (door_state > 0), 5, actions)
    walks = (front == 1) | (front == 8) | ((front == 4) & (door_state == 0))
    return np.where(acts & walks & (roll < 0.85), 2, actions)


def test_a_users_batched_minigrid_task_matches_minigrid_under_a_random_policy(key_rooms):
    """Success rate and mean return of one random policy on MiniGrid's own env of the user's
    task and on the batched one, within four standard errors: the batched layouts come from
    the task's own _gen_grid, drawn as MiniGrid draws them."""
    rng = np.random.default_rng(0)
    source = gymnasium.make(key_rooms, **KEY_ROOMS_SMALL).unwrapped
    theirs = []
    for episode in range(EPISODES):
        obs, total, ended = source.reset(seed=episode)[0], 0.0, False
        while not ended:
            action = seeking_policy(obs["image"].reshape(1, -1), rng)[0]
            obs, reward, terminated, truncated, _ = source.step(int(action))
            total, ended = total + reward, terminated or truncated
        theirs.append(total)
    env = envs.make(key_rooms, num_envs=256, seed=1, layouts=4096, **KEY_ROOMS_SMALL)
    obs, _ = env.reset()
    ours, totals = [], torch.zeros(256)
    while len(ours) < 4 * EPISODES:
        actions = torch.as_tensor(seeking_policy(obs.numpy(), rng))
        obs, reward, terminated, truncated, _ = env.step(actions)
        totals += reward
        ended = terminated | truncated
        ours.extend(totals[ended].tolist())
        totals[ended] = 0
    theirs, ours = np.array(theirs), np.array(ours)
    for name, success in (("success rate", True), ("mean return", False)):
        a, b = ((theirs > 0, ours > 0) if success else (theirs, ours))
        a, b = a.astype(float), b.astype(float)
        error = np.sqrt(a.var() / len(a) + b.var() / len(b))
        assert abs(a.mean() - b.mean()) < 4 * error, (name, a.mean(), b.mean(), error)
    assert 0.1 < (ours > 0).mean() < 0.9  # not a comparison of two zeros


class OwnRewardKeyRooms:
    """Mixed into the user's task: a reward of its own."""

    def _reward(self) -> float:
        return 2.0


class BallRoomsMixin:
    """Mixed into the user's task: an object class of its own in the first room."""

    def _gen_grid(self, width, height):
        super()._gen_grid(width, height)
        self.grid.set(1, height - 2, type("Bouncy", (Ball,), {})())


@pytest.mark.parametrize(
    ("mixin", "reason"),
    [
        (OwnRewardKeyRooms, "has a _reward of its own"),
        (BallRoomsMixin, "a Bouncy, not one of MiniGrid's"),
    ],
)
def test_a_task_not_of_minigrids_dynamics_says_why_and_runs_through_the_adapter(
    key_rooms, mixin, reason
):
    import importlib

    task = importlib.import_module(key_rooms.partition(":")[0]).KeyRoomsEnv
    env_id = f"MiniGrid-KeyRooms{mixin.__name__}-v0"
    gymnasium.register(env_id, entry_point=type(mixin.__name__, (mixin, task), {}))
    with pytest.warns(UserWarning, match=f"{env_id} is not batched .*{reason}.*Gymnasium adapter"):
        env = envs.make(env_id, num_envs=2, seed=0, layouts=4)
    assert isinstance(env, GymnasiumBatchedEnv)
    obs, _ = env.reset()
    assert obs.shape == (2, 147)


# ------------------------------------------------------- success and reward a user replaces
EMPTY_TO_GOAL = (2, 2, 1, 2, 2)  # Empty-5x5: from (1, 1) facing right to the goal at (3, 3)


def step_penalty(events, success):
    """A reward of the user's own: -0.01 a step, and 1 more on success."""
    return torch.where(success, 1.0, 0.0) - 0.01


def test_a_reward_fn_pays_exactly_what_it_says_on_a_scripted_episode():
    rewards = {}
    for name, reward_fn in (("minigrid", None), ("penalty", step_penalty)):
        env = envs.make("MiniGrid-Empty-5x5-v0", num_envs=2, seed=0, layouts=1, reward_fn=reward_fn)
        env.reset()
        steps = [env.step(torch.full((2,), action))[1:3] for action in EMPTY_TO_GOAL]
        assert [bool(terminated.all()) for _, terminated in steps] == [False] * 4 + [True]
        rewards[name] = torch.stack([reward for reward, _ in steps])
        assert rewards[name].dtype == torch.float32
    expected = torch.tensor([-0.01] * 4 + [0.99]).unsqueeze(1).expand(5, 2)
    assert torch.equal(rewards["penalty"], expected)
    # MiniGrid's own: 1 - 0.9 * 5 / 100 on the fifth step, nothing before
    minigrids = torch.tensor([0.0] * 4 + [0.955]).unsqueeze(1).expand(5, 2)
    assert torch.equal(rewards["minigrid"], minigrids)


def key_picked_up(events):
    """A success of the user's own: picking up a key."""
    return (events.picked_up & 15) == layouts.KEY


def test_a_success_fn_ends_the_episode_on_what_it_says():
    """Success on picking up the key in DoorKey: the episode ends exactly at each key pickup
    (seen from the view before the step), with MiniGrid's reward of that step count."""
    env = envs.make(
        "MiniGrid-DoorKey-5x5-v0", num_envs=64, seed=2, layouts=32, success_fn=key_picked_up
    )
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    pickups = 0
    elapsed = torch.zeros(64, dtype=torch.int64)  # counted here, from the episode ends
    for _ in range(200):
        actions = torch.as_tensor(seeking_policy(obs.numpy(), rng))
        hand_empty = obs[:, HELD] == layouts.NOTHING
        picks_key = (actions == 3) & (obs[:, FRONT] == layouts.KEY) & hand_empty
        step_count = elapsed + 1
        obs, reward, terminated, truncated, _ = env.step(actions)
        elapsed = torch.where(terminated | truncated, 0, step_count)
        assert torch.equal(terminated, picks_key)
        paid = (1 - 0.9 * (step_count.double() / env.max_steps)).float()
        assert torch.equal(reward, torch.where(picks_key, paid, 0.0))
        pickups += int(picks_key.sum())
    assert pickups > 20


def test_events_name_the_door_opened_and_the_object_picked_up():
    """StepEvents.opened and picked_up against what MiniGrid's own env did, step for step."""
    seen = []

    def record(events):
        seen.append((events.picked_up.clone(), events.opened.clone()))
        return events.reached_goal

    source = gymnasium.make("MiniGrid-DoorKey-5x5-v0").unwrapped
    env = BatchedMiniGridEnv(
        1, env_id="MiniGrid-DoorKey-5x5-v0", layouts=1, seed=0, success_fn=record
    )
    env.reset()
    rng = np.random.default_rng(3)
    events = Counter()
    for episode in range(20):
        source.reset(seed=episode)
        env.read_gymnasium_state(source, 0)
        for _ in range(40):
            action = seeking_action(source, rng)
            carried, front = source.carrying, source.grid.get(*source.front_pos)
            was_open = getattr(front, "is_open", True)
            source.step(action)
            env.step(torch.tensor([action]))
            picked_up, opened = (int(code[0]) for code in seen[-1])
            picked = carried is None and source.carrying is not None
            assert picked_up == (layouts.cell_code(source.carrying) if picked else layouts.NOTHING)
            now_open = front is not None and front.type == "door" and front.is_open and not was_open
            assert opened == (layouts.cell_code(front) if now_open else layouts.NOTHING)
            events["pickup"] += picked
            events["open"] += now_open
    assert events["pickup"] and events["open"], dict(events)


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            {"reward_fn": lambda events, success: 1.0},
            r"reward_fn returned a float; expected a float tensor of shape \(3,\)",
        ),
        (
            {"reward_fn": lambda events, success: success.long()},
            r"reward_fn returned a torch.int64 tensor of shape \(3,\)",
        ),
        (
            {"success_fn": lambda events: events.reached_goal[:1]},
            r"success_fn returned a torch.bool tensor of shape \(1,\)",
        ),
        (
            {"success_fn": lambda events: events.step_count},
            "success_fn returned a torch.int64 .* expected a bool tensor",
        ),
    ],
)
def test_a_rule_that_returns_the_wrong_thing_is_one_clear_error(rules, message):
    env = envs.make("MiniGrid-Empty-5x5-v0", num_envs=3, seed=0, layouts=1, **rules)
    env.reset()
    with pytest.raises(ValueError, match=message):
        env.step(torch.full((3,), 2))


def test_a_rule_that_is_not_a_function_is_named():
    with pytest.raises(TypeError, match="reward_fn must be a function of .*StepEvents, got 0.5"):
        BatchedMiniGridEnv(2, env_id="MiniGrid-Empty-5x5-v0", layouts=1, reward_fn=0.5)


def test_the_traced_step_with_a_users_rules_is_the_eager_step():
    """What compile=True compiles (make_fx of step_values) gives the eager values with a
    user's success and reward (tensor math of the events)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    env = BatchedMiniGridEnv(
        32, env_id="MiniGrid-DoorKey-5x5-v0", layouts=8, seed=0, success_fn=key_picked_up,
        reward_fn=step_penalty,
    )
    env.reset()
    generator = torch.Generator().manual_seed(1)
    graph = make_fx(lambda state, elapsed, actions: env.step_values(state, elapsed, actions))(
        env.state.clone(), env._elapsed.clone(), torch.randint(7, (32,), generator=generator)
    )
    ends = 0
    for _ in range(60):
        actions = torch.randint(7, (32,), generator=generator)
        expected = env.step_values(env.state, env._elapsed, actions)
        for value, traced in zip(expected, graph(env.state, env._elapsed, actions)):
            assert torch.equal(value, traced)
        ends += int(env.step(actions)[2].sum())
    assert ends > 0


def test_a_rule_that_reads_a_tensors_value_runs_eagerly_under_compile():
    def goal_if_any(events):
        return events.reached_goal if events.reached_goal.any() else events.target_done

    env = envs.make(
        "MiniGrid-Empty-5x5-v0", num_envs=2, seed=0, layouts=1, success_fn=goal_if_any, compile=True
    )
    env.reset()
    with pytest.warns(UserWarning, match="cannot be traced .* the step runs eagerly"):
        env.step(torch.full((2,), 2))
    assert not env.compile
    rewards = [env.step(torch.full((2,), action))[1] for action in EMPTY_TO_GOAL[1:]]
    assert rewards[-1].tolist() == [np.float32(0.955)] * 2


def test_a_task_with_its_own_reward_says_reward_fn_batches_it(key_rooms):
    import importlib

    task = importlib.import_module(key_rooms.partition(":")[0]).KeyRoomsEnv
    env_id = "MiniGrid-KeyRoomsOwnRewardFn-v0"
    gymnasium.register(env_id, entry_point=type("OwnRewardFn", (OwnRewardKeyRooms, task), {}))
    with pytest.warns(UserWarning, match="has a _reward of its own.*pass reward_fn= .* batch it"):
        envs.make(env_id, num_envs=2, seed=0, layouts=4)
    env = envs.make(env_id, num_envs=2, seed=0, layouts=4, reward_fn=step_penalty)
    assert isinstance(env, BatchedMiniGridEnv)
    env.reset()
    reward = env.step(torch.zeros(2, dtype=torch.int64))[1]
    assert torch.equal(reward, torch.full((2,), -0.01))
    with pytest.raises(ValueError, match="is not batched .*success_fn work on the batched MiniGrid"):
        envs.make("MiniGrid-Dynamic-Obstacles-5x5-v0", num_envs=2, success_fn=key_picked_up)
