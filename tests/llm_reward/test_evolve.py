"""The offline proposer (--proposer evolve): structures from the description, signs from the
task, Optuna-tuned weights, the same proposals from the same seed and history, and ties on a
floored fitness told apart."""

from __future__ import annotations

import re

import gymnasium
import numpy as np
import pytest
import torch

from rewardlab import llm_reward
from rewardlab.envs.descriptions import ActionVariable, EnvDescription, StateVariable, column
from rewardlab.llm_reward.programs.program import RewardProgram
from rewardlab.llm_reward.programs.references import own_reward_program
from rewardlab.llm_reward.search.evolve import (
    REACH_ALIVE,
    EvolveProposer,
    goal_directions,
    kept_conditions,
    named_labels,
    task_kind,
)
from rewardlab.llm_reward.search.evolve_random import (
    GUARDED,
    EvolveRandomProposer,
    Guard,
    Term,
    random_motion,
    render_program,
)
from rewardlab.llm_reward.search.progress import Progress
from rewardlab.llm_reward.search.records import Candidate, best_of, rank_key
from rewardlab.llm_reward.training import Checkpoint, TrainingRun

TASKS = {"CartPole-v1": "keep the pole balanced upright", "MountainCar-v0": "reach the flag",
         "Acrobot-v1": "swing the tip above the bar", "Pendulum-v1": "swing up and balance",
         "MountainCarContinuous-v0": "reach the flag",
         "Hopper-Backward-v0": "Hop backwards, staying upright, until the torso's x position is at most -2 m."}
MUJOCO = {"Hopper-Backward-v0"}


def proposer(env_id: str, seed: int = 0) -> EvolveProposer:
    return EvolveProposer(llm_reward.describe(env_id), seed, llm_reward.reference_programs(env_id), TASKS[env_id])


def result(fitness: float, train_return: float | None = None, success: float | None = None) -> TrainingRun:
    points = [Checkpoint(step=1000, fitness=fitness, success_rate=success, train_return=train_return)]
    return TrainingRun("MountainCar-v0", True, fitness, success, points, [], None, 1000, 1.0, None, None, None,
                      None, "")


def trained(genome: list[dict], fitness: float, sample: int, iteration: int = 0, **kwargs) -> Candidate:
    return Candidate(iteration, sample, genome=genome, source=f"# {iteration} {sample}",
                     result=result(fitness, **kwargs))


@pytest.mark.parametrize("env_id", sorted(TASKS))
def test_every_proposal_passes_the_checks_and_repeats_with_the_seed(env_id: str) -> None:
    if env_id in MUJOCO:
        pytest.importorskip("mujoco.batch")
    first = proposer(env_id).propose(0, 4, [])
    assert first == proposer(env_id).propose(0, 4, [])
    history = [trained(genome, fitness=float(i), sample=i) for i, (genome, _) in enumerate(first)]
    later = proposer(env_id).propose(1, 4, history)
    assert later == proposer(env_id).propose(1, 4, history), "the same history, the same proposals"
    assert {source for _, source in later}.isdisjoint(source for _, source in first)
    for _, source in first + later:
        RewardProgram.from_source(source).check(env_id)


def test_the_first_round_tries_the_structures_a_reader_would() -> None:
    genomes = [[(t["kind"], t["variable"], t["weight"]) for t in genome] for genome, _ in proposer("MountainCar-v0").propose(0, 4, [])]
    assert genomes[0] == [("task", None, 1.0), ("potential", None, 1.0)]  # the human reward's structure
    assert genomes[1] == [("task", None, 1.0)]
    assert ("progress", "position", 1.0) in genomes[2]  # the flag is at position >= 0.5: rightwards


@pytest.mark.parametrize("env_id", ["MountainCarContinuous-v0", "Pendulum-v1", "CartPole-v1", "MountainCar-v0"])
def test_the_anchor_is_the_human_reward_itself(env_id: str) -> None:
    from rewardlab import envs
    from rewardlab.llm_reward.programs.program import RewardFunction
    from rewardlab.llm_reward.search.budgets import default_budget, learner_discount

    gamma = learner_discount(default_budget(env_id).ppo_kwargs, "potential")
    references = llm_reward.reference_programs(env_id, gamma)
    description = llm_reward.describe(env_id)
    evolve = EvolveProposer(description, 0, references, TASKS[env_id], gamma=gamma)
    anchor = evolve.anchor()
    assert anchor is not None and anchor == evolve.propose(0, 1, [])[0][1]  # proposed first
    ours, human = (RewardFunction(RewardProgram.from_source(anchor), description),
                   RewardFunction(references["human"], description))
    env = envs.make(env_id, num_envs=8, seed=3)
    env.action_space.seed(3)
    obs, _ = env.reset()
    for _ in range(60):
        actions = torch.as_tensor(env.action_space.sample())
        actions = actions.float() if actions.dtype.is_floating_point else actions
        next_obs, _, terminated, _, info = env.step(actions)
        torch.testing.assert_close(ours(obs, actions, info["final_obs"], terminated)[0],
                                   human(obs, actions, info["final_obs"], terminated)[0], rtol=1e-5, atol=1e-5)
        obs = next_obs
    env.close()
    # without a human reference: the env's own reward alone
    own = EvolveProposer(description, 0, {"sparse": references["sparse"]}, TASKS[env_id], gamma=gamma)
    assert own.anchor() == own.render([Term("task", None, 1.0)])


def test_signs_follow_the_task() -> None:
    car = llm_reward.describe("MountainCar-v0")
    assert task_kind(car, "reach the flag") == "reach"
    assert goal_directions(car, "reach the flag", ("position", "velocity")) == {"position": 1, "velocity": 0}
    pole = llm_reward.describe("CartPole-v1")
    assert task_kind(pole, "keep the pole balanced upright") == "survive"
    # a survival task keeps its variables near their target, whatever "up" says
    assert set(goal_directions(pole, "keep it up", pole.state_names).values()) == {0}
    shapes = proposer("MountainCar-v0")._shapes("position")
    assert "progress+" in shapes and "progress-" not in shapes and "linear-" not in shapes
    assert "away+" in shapes and "away-" not in shapes  # reaching the flag builds energy


def test_later_rounds_lean_towards_what_scored_well() -> None:
    env = proposer("MountainCar-v0")
    good = [asdict_terms([Term("task", None, 1.0), Term("potential", None, 2.0)])]
    bad = [asdict_terms([Term("task", None, 1.0), Term("linear", "position", 5.0)])]
    history = [trained(good[0], -120.0, 0), trained(bad[0], -200.0, 1),
               *[trained(asdict_terms([Term("task", None, 1.0), Term("away", "velocity", 0.1 * (i + 1))]), -200.0,
                         i + 2) for i in range(6)]]
    proposals = env.propose(1, 8, history)
    with_potential = sum(any(t["kind"] == "potential" for t in genome) for genome, _ in proposals)
    assert with_potential >= 4, "TPE keeps the term of the only candidate that left the floor"


def asdict_terms(terms: list[Term]) -> list[dict]:
    return [vars(term) for term in terms]


def test_ties_on_a_floored_fitness_are_told_apart_and_named_alike() -> None:
    floor = [trained([], -200.0, 0, train_return=-200.0), trained([], -200.0, 1, train_return=-187.0),
             trained([], -200.0, 2, train_return=None)]
    assert best_of(floor).sample == 1, "the training episodes that reached the flag count"
    assert rank_key(floor[1]) > rank_key(floor[0]) > rank_key(floor[2])
    same = [trained([], 500.0, 0, train_return=480.0), trained([], 500.0, 1, train_return=480.0)]
    assert best_of(same).sample == 0, "the earliest on a full tie"
    progress = Progress(1, 2, enabled=False)
    progress.start_iteration(0, 2)
    for candidate in reversed(same):  # the later one finishes first
        progress.finished(candidate.key, True, candidate)
    assert progress.best == (500.0, same[0].key), "the progress line names the report's best"


def _described(summary: str, terminated_meaning: str, success_metric: str = "the success rate") -> EnvDescription:
    """A user's description: a walker on a line that must get far without falling."""
    state = (StateVariable("pos", "position along the line", "m", read=column(0)),
             StateVariable("height", "height of the body", "m", read=column(1)),
             StateVariable("tilt", "tilt of the body", "rad", read=column(2)),
             StateVariable("pos_velocity", "velocity along the line", "m/s", read=column(3)))
    return EnvDescription("Walker-v0", summary, state, ActionVariable("torques", "float32", (2,)), success_metric,
                          success=lambda final_obs, terminated, truncated: terminated,
                          terminated_meaning=terminated_meaning)


def test_how_episodes_fail_sets_no_goal_and_bars_keep_a_variable_near_zero() -> None:
    walker = _described(
        "the walker succeeds on the first step with pos >= 3 m while height > 1 and |tilt| < 0.2. "
        "It ends without success when height <= 0.5 or |tilt| >= 0.2.",
        "the walker succeeded or fell with this step",
    )
    assert task_kind(walker, "walk forward") == REACH_ALIVE
    # height: the success rule's "> 1", not the failure's "<= 0.5"; tilt: near 0 although the
    # task says "forward"; the velocity of pos goes where pos goes
    assert goal_directions(walker, "walk forward", walker.state_names) == {
        "pos": 1, "height": 1, "tilt": 0, "pos_velocity": 1}
    # where episodes start with height 1.2, "height > 1" is a condition to keep, not a goal
    assert goal_directions(walker, "walk forward", walker.state_names, {"pos": 0.0, "height": 1.2}) == {
        "pos": 1, "height": 0, "tilt": 0, "pos_velocity": 1}
    reach = _described("the walker must get to pos >= 3 m, which ends the episode.", "the walker succeeded")
    assert task_kind(reach, "walk") == "reach"
    assert task_kind(_described("get to pos >= 3 m", "the walker reached the goal or fell over"), "walk") == REACH_ALIVE
    assert task_kind(_described("get to pos >= 3 m", "the walker reached the goal"), "walk") == "reach"


def test_conditions_kept_from_the_start_guard_progress() -> None:
    walker = _described(
        "the walker succeeds on the first step with pos >= 3 m while height > 1 and |tilt| < 0.2. "
        "It ends without success when height <= 0.5 or |tilt| >= 0.2.",
        "the walker succeeded or fell with this step",
    )
    start = {"pos": 0.0, "height": 1.2, "tilt": 0.0, "pos_velocity": 0.0}
    # pos >= 3 is a goal, not kept; |tilt| < 0.2 is a magnitude; "height <= 0.5" is how it fails
    guards = kept_conditions(walker, "walk forward", walker.state_names, start)
    assert guards == [Guard("height", 1.2, 1.0)]
    source = render_program([Term(GUARDED, "pos", 2.0)], walker, guards=guards)
    namespace: dict = {}
    exec(compile(source, "guarded", "exec"), namespace)  # our own rendering, not a user's program
    pos, next_pos = torch.zeros(5), torch.full((5,), 0.3)
    next_height = torch.tensor([1.2, 1.5, 1.1, 1.0, 0.9])
    reward, parts = namespace["compute_reward"](pos=pos, next_pos=next_pos, next_height=next_height)
    scale = float(source.split("(next_pos - pos) / ")[1].split(")")[0])
    progress = 2.0 * 0.3 / scale
    # full pay at and above the start, 1 - share**2 of the way to the bound, nothing past it
    torch.testing.assert_close(reward, progress * torch.tensor([1.0, 1.0, 0.75, 0.0, 0.0]))
    assert set(parts) == {"guarded_pos"}
    with pytest.raises(ValueError, match="kept condition"):
        render_program([Term(GUARDED, "height", 1.0)], walker, guards=guards)


def test_turning_in_place_pays_turning_less_the_further_the_ant_drifts() -> None:
    pytest.importorskip("mujoco.batch")
    ant = EvolveProposer(llm_reward.describe("Ant-TurnInPlace-v0"), 0,
                             llm_reward.reference_programs("Ant-TurnInPlace-v0"), "Turn in place by a full turn.")
    assert ant.guards == [Guard("distance_from_start", 0.0, 1.0)]
    assert ant.directions["turned"] == 1
    assert "guarded+" in ant._shapes("turned") and "guarded-" not in ant._shapes("turned")
    first = [{(t["kind"], t["variable"]) for t in genome} for genome, _ in ant.propose(0, 4, [])]
    assert {("task", None), ("guarded", "turned"), ("alive", None)} in first
    for _, source in ant.propose(0, 4, []):
        RewardProgram.from_source(source).check("Ant-TurnInPlace-v0")


def test_where_failing_also_ends_episodes_alive_pays_and_no_terminal_term_is_proposed() -> None:
    pytest.importorskip("mujoco.batch")
    hopper = proposer("Hopper-Backward-v0")
    assert hopper.kind == REACH_ALIVE
    assert hopper.directions["x"] == -1 and hopper.directions["x_velocity"] == -1
    assert hopper.directions["torso_z"] == 0, "it starts upright: torso_z > 0.7 is kept, not pursued"
    assert hopper.directions["torso_angle"] == 0
    first = [[Term(**term) for term in genome] for genome, _ in hopper.propose(0, 4, [])]
    # backward progress along each direction alone and both, beside the success and a small wage
    assert [{(t.kind, t.variable, t.weight) for t in terms} for terms in first[1:]] == [
        {("task", None, 100.0), ("alive", None, 0.1), ("progress", "x", -1.0)},
        {("task", None, 100.0), ("alive", None, 0.1), ("linear", "x_velocity", -1.0)},
        {("task", None, 100.0), ("alive", None, 0.1), ("progress", "x", -1.0), ("linear", "x_velocity", -1.0)},
    ]
    history = [trained([vars(t) for t in terms], fitness=0.1 * i, sample=i) for i, terms in enumerate(first)]
    history += [trained([vars(Term("progress", "x", -2.0))], fitness=1.0, sample=4)]  # an older search's
    for iteration in (1, 2):
        proposals = hopper.propose(iteration, 8, history)
        for genome, _ in proposals:
            kinds = {term["kind"]: term["weight"] for term in genome}
            assert "terminal" not in kinds, "a terminal term would pay (or charge) success and falling alike"
            # progress alone pays a hopper for falling backwards: every program pays it to stay up,
            # a small wage beside progress, too small to stand still for
            assert 0.03 <= kinds["alive"] <= 0.3
        history += [trained(genome, fitness=0.0, sample=i, iteration=iteration) for i, (genome, _) in
                    enumerate(proposals)]


def test_progress_of_a_variable_without_a_range_is_scaled_by_its_motion() -> None:
    cartpole = llm_reward.describe("CartPole-v1")
    motion = random_motion(cartpole)
    scales = motion.step
    assert set(scales) == {"x_dot", "theta_dot"}, "x and theta have ranges, which stay their scale"
    assert motion == random_motion(cartpole), "measured the same way every time"
    assert set(motion.start) == set(cartpole.state_names) and all(abs(v) < 0.05 for v in motion.start.values())
    assert all(0.0 < value < 5.0 for value in scales.values())
    source = proposer("CartPole-v1").render([Term("progress", "x_dot", 1.0), Term("progress", "x", 1.0)])
    assert f"(next_x_dot - x_dot) / {scales['x_dot']}" in source
    assert "(next_x - x) / 4.8" in source  # the range the description declares


class _BreaksOnStep(gymnasium.Env):
    """A user's env that resets but fails on its first step."""

    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        raise RuntimeError("the simulator lost its licence")


def test_an_env_that_cannot_be_stepped_leaves_the_ranges_and_says_so() -> None:
    gymnasium.register("RewardlabTest/BreaksOnStep-v0", entry_point=_BreaksOnStep, max_episode_steps=10)
    broken = EnvDescription("RewardlabTest/BreaksOnStep-v0", "move", (StateVariable("x", "x", read=column(0)),),
                            ActionVariable("0 or 1"), "the return")
    with pytest.warns(UserWarning, match="lost its licence"):
        motion = random_motion(broken)
    assert motion.start == {"x": 0.0} and motion.step == {}


def test_a_goal_conditioned_task_gets_terms_on_what_the_agent_moves_and_no_alive_trap(tmp_path, monkeypatch) -> None:
    from user_envs import write_point_mass

    from rewardlab.envs.description_files import load_description, use_description
    from rewardlab.llm_reward.programs.references import own_reward_program

    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = write_point_mass(tmp_path, "proposer_point_mass")
    references = {"sparse": own_reward_program()}
    generic = EvolveProposer(llm_reward.describe(env_id), 0, references, "reach the goal, avoid the pit")
    # the goal's coordinates never move: no term of their own, only the distance to them
    assert generic.pairs == [("pos_0", "goal_0"), ("pos_1", "goal_1")]
    assert not {"goal_0", "goal_1"} & set(generic.variables)
    use_description(load_description(tmp_path / "pointmass.toml", env_id)[1])
    described = EvolveProposer(llm_reward.describe(env_id), 0, references, "reach the goal, avoid the pit")
    assert described.kind == REACH_ALIVE and described.pairs == [("pos_x", "goal_x"), ("pos_y", "goal_y")]
    assert described.directions["goal_distance"] == -1  # the success rule: goal_distance < 0.15
    history: list[Candidate] = []
    for iteration in range(3):
        proposals = described.propose(iteration, 6, history)
        for genome, source in proposals:
            terms = [Term(**term) for term in genome]
            assert not any(term.variable in ("goal_x", "goal_y") for term in terms), source
            task = next(term for term in terms if term.kind == "task")  # success ends the episode: always paid
            wage = sum(term.weight for term in terms if term.kind == "alive")
            # a whole 60-step episode of staying alive pays at most a tenth of reaching the goal
            assert wage * 60 <= 0.1 * task.weight + 1e-6, source
            RewardProgram.from_source(source).check(described.description)
        history += [trained(genome, fitness=0.1 * i, sample=i, iteration=iteration)
                    for i, (genome, _) in enumerate(proposals)]
    first = [{term["kind"] for term in genome} for genome, _ in described.propose(0, 6, [])]
    assert {"task", "closer"} in first
    closer = render_program([Term("closer", None, 1.0)], described.description, pairs=described.pairs)
    assert "torch.sqrt((pos_x - goal_x) ** 2 + (pos_y - goal_y) ** 2)" in closer


MINIGRID_TASKS = {"MiniGrid-DoorKey-5x5-v0": "pick up the key, open the door, reach the goal",
                  "MiniGrid-LavaGapS5-v0": "avoid the lava and reach the goal",
                  "MiniGrid-KeyCorridorS3R1-v0": "get the key, unlock the door, pick up the ball"}
DOOR_KEY = "MiniGrid-DoorKey-5x5-v0"


def _arithmetic_on_labels(source: str, labels: set[str]) -> list[str]:
    """Every use of a categorical variable in a program's body that is not ``(name == k)``."""
    body = source.split("def compute_reward(", 1)[1].split("\n", 1)[1]  # past the signature
    wrong = []
    for match in re.finditer(r"\b(?:next_)?([a-z_]+)\b", body):
        if match.group(1) in labels and match.group(0).removeprefix("next_") == match.group(1):
            if not re.match(r"\s*==\s*\d+\)\.float\(\)", body[match.end():]):
                wrong.append(body[match.start():match.end() + 20])
    return wrong


@pytest.mark.parametrize("env_id", sorted(MINIGRID_TASKS))
def test_minigrid_labels_are_only_compared_and_the_env_reward_is_in_every_one(env_id: str) -> None:
    pytest.importorskip("minigrid")
    description = llm_reward.describe(env_id)
    labels = {variable.name for variable in description.state if variable.categorical}
    sparse = {"sparse": own_reward_program()}
    sources: list[str] = []
    for seed in range(3):
        evolve = EvolveProposer(description, seed, sparse, MINIGRID_TASKS[env_id])
        history: list[Candidate] = []
        for iteration in range(4):  # the first round's structures, then TPE's
            proposals = evolve.propose(iteration, 6, history)
            history += [trained(genome, fitness=float((seed + 7 * i) % 5) / 5, sample=i,
                                iteration=iteration) for i, (genome, _) in enumerate(proposals)]
            sources += [source for _, source in proposals]
        random_proposer = EvolveRandomProposer(description, seed, sparse)
        random_history: list[Candidate] = []
        for iteration in range(3):
            proposals = random_proposer.propose(iteration, 6, random_history)
            random_history += [trained(g, fitness=float(i % 3), sample=i, iteration=iteration)
                               for i, (g, _) in enumerate(proposals)]
            sources += [source for _, source in proposals]
    assert len(set(sources)) > 50
    for source in sources:
        assert not _arithmetic_on_labels(source, labels), source
    evolve_sources = sources[: 4 * 6]
    assert all("r_task = " in source for source in evolve_sources), "the env's reward in each"
    indicator = re.compile(r"\b(has_key|door_open|goal_visible) == 1\b")
    assert any(indicator.search(source) for source in evolve_sources)
    for source in sources[:10]:
        RewardProgram.from_source(source).check(env_id)


def test_the_checker_of_the_property_catches_arithmetic_on_a_label() -> None:
    labels = {"front_object", "has_key"}
    bad = "def compute_reward(front_object, next_front_object):\n    r = 7.8 * front_object / 10\n"
    closer = ("def compute_reward(front_object, next_front_object):\n"
              "    r = next_front_object - front_object\n")
    good = ("def compute_reward(has_key, next_has_key):\n"
            "    r = (next_has_key == 1).float() - (has_key == 1).float()\n")
    assert _arithmetic_on_labels(bad, labels) and _arithmetic_on_labels(closer, labels)
    assert not _arithmetic_on_labels(good, labels)


def test_minigrid_signs_follow_the_task_and_a_locked_door_is_never_paid() -> None:
    pytest.importorskip("minigrid")
    door_key = llm_reward.describe(DOOR_KEY)
    labels = named_labels(door_key, MINIGRID_TASKS[DOOR_KEY])
    assert labels[:2] == [("has_key", 1, 1), ("door_open", 1, 1)], "the indicators first"
    # open, not locked
    assert ("front_state", 3, 1) not in labels and ("front_state", 1, 1) in labels
    lava_gap = llm_reward.describe("MiniGrid-LavaGapS5-v0")
    lava = named_labels(lava_gap, "avoid the lava and reach the goal")
    assert ("front_object", 9, -1) in lava and ("goal_visible", 1, 1) in lava
    evolve = EvolveProposer(door_key, 0, {"sparse": own_reward_program()}, MINIGRID_TASKS[DOOR_KEY])
    assert evolve.directions == {"goal_distance": -1}, "nearer the goal; no label has a direction"
    first = [[(term["kind"], term["variable"], term["weight"]) for term in genome]
             for genome, _ in evolve.propose(0, 4, [])]
    assert first[0] == [("task", None, 1.0)], "the env's own reward alone first"
    assert ("event", "has_key", 1.0) in first[1] and ("event", "door_open", 1.0) in first[1]
    assert ("shaped", "goal_distance", -1.0) in first[2]


def test_a_shaped_term_is_zero_at_the_end_and_telescopes() -> None:
    pytest.importorskip("minigrid")
    description = llm_reward.describe("MiniGrid-DoorKey-5x5-v0")
    source = render_program([Term("shaped", "goal_distance", -1.0)], description, gamma=0.9)
    RewardProgram.from_source(source).check("MiniGrid-DoorKey-5x5-v0")
    namespace: dict = {}
    exec(source, namespace)  # our own program, rendered above
    # a step nearer; the step onto the goal
    d, next_d = torch.tensor([3.0, 1.0]), torch.tensor([2.0, 10.0])
    ended = torch.tensor([False, True])
    value, _ = namespace["compute_reward"](goal_distance=d, next_goal_distance=next_d,
                                           terminated=ended)
    assert torch.allclose(value, torch.tensor([-(0.9 * 0.2) + 0.3, 0.1]))
