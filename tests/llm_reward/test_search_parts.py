"""Parts of the reward-code search: the evolve proposer, reflection and hacking signals, the
examples library, Kendall tau, the run store, best_reward.py with load_reward (Gymnasium
and batched wrappers) and ``rewardlab train --reward-program``, an offline evolve search
through the CLI, and the Ray executor (skipped without Ray)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from rewardlab import envs, llm_reward
from rewardlab.app.cli import main as rewardlab
from rewardlab.llm_reward.clients import Usage
from rewardlab.llm_reward.programs.loading import reward_file_text
from rewardlab.llm_reward.programs.program import RewardFunction
from rewardlab.llm_reward.search import SearchConfig, SearchResult, best_candidate
from rewardlab.llm_reward.search.evolve_random import STATE_KINDS, EvolveRandomProposer, Term
from rewardlab.llm_reward.search.examples import EXAMPLES, most_similar
from rewardlab.llm_reward.search.executors import EvalTask, Executor
from rewardlab.llm_reward.search.prescreen import kendall_tau_b
from rewardlab.llm_reward.search.records import (
    Candidate,
    PrescreenScore,
    confirmed_fitness,
    seed_fitness,
)
from rewardlab.llm_reward.search.reflection import (
    PROGRAM_OUTPUT_LABEL,
    component_notes,
    reflect,
    reward_signals,
)
from rewardlab.llm_reward.search.report import prescreen_summary
from rewardlab.llm_reward.search.store import JOURNAL_FILE, RunStore
from rewardlab.llm_reward.training import Checkpoint, Failure, SeedRun, TrainingRun

DESCRIBED = ["CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1", "Pendulum-v1"]
TINY_FLAGS = ["--steps", "256", "--num-envs", "4", "--ppo", '{"n_steps": 32, "n_epochs": 2}',
              "--checkpoints", "2", "--eval-episodes", "2", "--timeout", "120", "--no-compile"]


def curve(fitness: list[float], reward: list[float], **components: list[float]) -> list[Checkpoint]:
    return [
        Checkpoint(step=1000 * (i + 1), fitness=f, success_rate=None, train_return=f, reward=r,
                   components={f"program/{name}": values[i] for name, values in components.items()})
        for i, (f, r) in enumerate(zip(fitness, reward))
    ]


def trained(genome: list[Term], points: list[Checkpoint], fitness: float, sample: int = 0) -> Candidate:
    result = TrainingRun("CartPole-v1", True, fitness, None, points, [], None, 1000, 1.0, None, None, None,
                        None, "")
    return Candidate(0, sample, genome=[vars(term) for term in genome], source=f"# {sample}", result=result,
                     signals=reward_signals(points))


# ------------------------------------------------------------------- evolve proposer
@pytest.mark.parametrize("env_id", DESCRIBED)
def test_evolve_programs_pass_the_checks_and_repeat_with_the_seed(env_id: str) -> None:
    proposer = EvolveRandomProposer(llm_reward.describe(env_id), seed=3, references=llm_reward.reference_programs(env_id))
    proposals = proposer.propose(0, 12, [])
    for _, source in proposals:
        llm_reward.RewardProgram.from_source(source).check(env_id)
    assert len({source for _, source in proposals}) == 12
    # Every kind of term, including the borrowed potential, runs on a batch.
    description = llm_reward.describe(env_id)
    every_kind = [Term(kind, description.state_names[0], 0.5) for kind in STATE_KINDS]
    every_kind += [Term(kind, None, 1.0) for kind in proposer._global_kinds]
    function = RewardFunction(llm_reward.RewardProgram.from_source(proposer.render(every_kind)), description)
    env = envs.make(env_id, num_envs=3, seed=0)
    obs, _ = env.reset()
    action = torch.as_tensor(env.action_space.sample())
    next_obs, _, terminated, _, info = env.step(action.float() if action.dtype.is_floating_point else action)
    reward, components = function(obs, action, info["final_obs"], terminated)
    assert reward.shape == (3,) and set(components) == {term.name for term in every_kind}
    assert proposals[0][0] == [{"kind": "task", "variable": None, "weight": 1.0, "temperature": 1.0}]
    again = EvolveRandomProposer(llm_reward.describe(env_id), seed=3, references=llm_reward.reference_programs(env_id))
    assert again.propose(0, 12, []) == proposals


def test_both_offline_proposers_write_the_potential_term_at_the_discount_candidates_train_with() -> None:
    # A reference written at PPO's default discount, a learner at Pendulum's budget's 0.9:
    # the proposer's GAMMA replaces the reference's, so the term telescopes for that learner.
    from rewardlab.llm_reward.search.evolve import EvolveProposer
    from rewardlab.shaping import potentials

    description = llm_reward.describe("Pendulum-v1")
    references = llm_reward.reference_programs("Pendulum-v1")
    for proposer in (EvolveRandomProposer(description, seed=0, references=references, gamma=0.9),
                     EvolveProposer(description, 0, references, gamma=0.9)):
        source = proposer.render([Term("potential", None, 1.0)])
        assert [line for line in source.splitlines() if line.startswith("GAMMA")] == ["GAMMA = 0.9"]
        function = RewardFunction(llm_reward.RewardProgram.from_source(source), description)
        env = envs.make("Pendulum-v1", num_envs=4, seed=0)
        obs, _ = env.reset()
        action = torch.as_tensor(env.action_space.sample()).float()
        _, _, terminated, _, info = env.step(action)
        _, components = function(obs, action, info["final_obs"], terminated)
        phi = potentials.PendulumEnergy(weight=5.0)
        torch.testing.assert_close(components["potential"], 0.9 * phi(info["final_obs"]) - phi(obs))


def test_evolve_children_come_from_the_fittest_and_drop_constant_components() -> None:
    description = llm_reward.describe("CartPole-v1")
    proposer = EvolveRandomProposer(description, seed=0, references=llm_reward.reference_programs("CartPole-v1"))
    flat = Term("alive", None, 1.0)
    useful = Term("square", "theta", -2.0)
    best = trained([flat, useful], curve([10, 50, 90], [1, 2, 3], alive=[1.0, 1.0, 1.0], square_theta=[-3, -2, -1]),
                   90.0, sample=0)
    worst = trained([Term("linear", "x", 1.0)], curve([9, 9, 9], [1, 2, 3], linear_x=[0.1, 0.2, 0.3]), 9.0,
                    sample=1)
    children = proposer.propose(1, 30, [best, worst])
    kinds = [{term["kind"] for term in genome} for genome, _ in children]
    assert sum("square" in k for k in kinds) > sum("linear" in k for k in kinds)  # the fittest passes on more
    assert sum("alive" in k for k in kinds) < len(children) / 2  # the constant component is mostly dropped
    for _, source in children:
        llm_reward.RewardProgram.from_source(source).check("CartPole-v1")


# --------------------------------------------------------------------- reflection
def test_reward_hacking_signal_and_correlation() -> None:
    hacked = reward_signals(curve([50, 80, 90, 85, 70, 60], [0.1, 0.2, 0.3, 0.5, 0.7, 0.9]))
    assert hacked.hacking and "rose from" in hacked.reason
    honest = reward_signals(curve([10, 20, 40, 60, 80, 95], [0.1, 0.2, 0.3, 0.5, 0.7, 0.9]))
    assert not honest.hacking and honest.correlation == pytest.approx(0.99, abs=0.02)
    solved = curve([50, 80, 90, 85, 70, 60], [0.1, 0.2, 0.3, 0.5, 0.7, 0.9])
    solved[-1].success_rate = 1.0
    assert not reward_signals(solved).hacking
    assert reward_signals(curve([1, 2], [1, 2])).correlation is None


def test_a_floored_fitness_is_exploration_not_hacking() -> None:
    # MountainCar stuck at -200 while the program's reward rises: no flag, and the note says why
    stuck = reward_signals(curve([-200] * 6, [0.1, 0.2, 0.3, 0.5, 0.7, 0.9]))
    assert not stuck.hacking and stuck.stuck and "exploration" in stuck.reason
    # a rise that is large next to its own range but tiny next to the reward's size is no signal
    flat = reward_signals(curve([50, 80, 90, 85, 70, 60], [100.0, 100.0, 100.0, 100.001, 100.002, 100.003]))
    assert not flat.hacking


def test_reflection_lists_components_and_notes() -> None:
    points = curve([10, 20, 30], [1, 2, 3], flat=[0.5, 0.5, 0.5], huge=[100, 200, 300], small=[0.1, 0.2, 0.3])
    notes = {(note.component, note.kind) for note in component_notes(points)}
    assert notes == {("flat", "constant"), ("huge", "dominant")}
    result = TrainingRun("CartPole-v1", True, 30.0, None, points, [], None, 3000, 1.0, None, None, None, None, "")
    text = reflect(result)
    assert "task fitness (the env's own return of evaluation episodes): [10, 20, 30], max 30, mean 20, min 10" in text
    assert "component `huge` (mean per step): [100, 200, 300]" in text
    assert "stays nearly constant" in text and "dominates" in text
    failed = TrainingRun("CartPole-v1", False, None, None, [], [], Failure("program", "it raised", "Traceback: x"),
                        1, 1.0, None, None, None, None, "")
    # the reason and traceback are the program's text: quoted as code, in a block it cannot close
    assert reflect(failed) == ("it failed (program). " + PROGRAM_OUTPUT_LABEL
                               + "\n```text\nit raised\n\nTraceback: x\n```")


# ------------------------------------------------------------- examples, Kendall tau
def test_examples_pass_the_checks_and_retrieval_ranks_by_similarity() -> None:
    for example in EXAMPLES:
        llm_reward.RewardProgram.from_source(example.program).check(example.env_id)
    found = most_similar("swing the pendulum up and keep it balanced", "Pendulum-v1", k=2)
    assert [e.instruction for e in found][0] == "Swing the pendulum up and balance it upright."
    assert all(e.env_id == "Pendulum-v1" for e in found)
    assert most_similar("anything", "CartPole-v1", k=0) == []


def test_kendall_tau_b() -> None:
    assert kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == (1.0, 6)
    assert kendall_tau_b([4, 3, 2, 1], [10, 20, 30, 40]) == (-1.0, 6)
    tau, pairs = kendall_tau_b([5, 5, 5, 5], [1, 2, 3, 4])
    assert tau == 0.0 and pairs == 6
    assert kendall_tau_b([1, 2, 3], [7, 7, 7]) == (None, 0)


def test_prescreen_audit_summary_says_whether_it_would_have_rejected_the_best() -> None:
    candidates = [trained([Term("alive", None, 1.0)], curve([fitness] * 3, [1, 2, 3]), fitness, sample=i)
                  for i, fitness in enumerate((10.0, 50.0, 30.0))]
    taus = (0.9, -0.4, 0.5)  # the eventual best (fitness 50) ranks the trajectories badly
    for candidate, tau in zip(candidates, taus):
        candidate.prescreen = PrescreenScore(tau, 20, tau >= 0.2, [], "")
    candidates.append(Candidate(0, 3, prescreen=PrescreenScore(None, 0, True, [], "inconclusive"),
                                failure=Failure("program", "raised")))
    config = SearchConfig("CartPole-v1", "balance", proposer="evolve", prescreen="audit")
    result = SearchResult(config, Path("out"), candidates, best_candidate(candidates), {}, None, Usage(), 0.0,
                          False, 0, 0, 0, "local", None, 1.0)
    screen = prescreen_summary(result)
    assert screen is not None and screen["scored"] == 4 and screen["rejected"] == 1
    assert screen["rejected_eventual_best"] and screen["best_fitness_among_rejected"] == 50.0
    assert screen["inconclusive"] == 1


def test_the_report_is_rendered_from_the_result_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlab.llm_reward.search.report import render

    monkeypatch.chdir(tmp_path)
    candidates = [trained([Term("alive", None, 1.0)], curve([fitness] * 3, [1, 2, 3]), fitness, sample=i)
                  for i, fitness in enumerate((10.0, 50.0))]
    config = SearchConfig("CartPole-v1", "balance", proposer="evolve")
    result = SearchResult(config, Path("out"), candidates, best_candidate(candidates), {}, None, Usage(), 0.0,
                          False, 0, 0, 0, "local", None, 1.0, feedback={0: "reward speed <b>more</b>"},
                          fork_server_start_s=2.5)
    files = render(result)
    assert set(files) == {"report.md", "report.html", "summary.json", "best_reward.py"}
    assert files == render(result)  # the same result, the same files
    assert "reward speed" in files["report.md"] and "&lt;b&gt;more" in files["report.html"]
    assert json.loads(files["summary.json"])["cost"]["fork_server_start_s"] == 2.5
    assert not list(tmp_path.iterdir())  # nothing written: writing is the search's


def test_a_run_folders_stored_trajectories_are_read_as_data(tmp_path: Path, monkeypatch) -> None:
    # --resume of a run folder whose prescreen/trajectories.json is malformed stopped the search
    # with a KeyError or TypeError traceback; it is collected again instead
    from types import SimpleNamespace

    from rewardlab.llm_reward.search import loop

    good = {"policy": "random", "return": 3.0, "states": [[0.0], [1.0]], "actions": [1], "rewards": [1.0],
            "terminated": True}
    collected: list[int] = []
    monkeypatch.setattr(loop, "collect_trajectories", lambda *args, **kwargs: collected.append(1) or [good])
    config = SearchConfig("CartPole-v1", "balance", prescreen="reject", prescreen_steps=64)
    search = SimpleNamespace(store=RunStore(tmp_path), config=config, progress=SimpleNamespace(note=print))
    (tmp_path / "prescreen").mkdir()
    stored = tmp_path / "prescreen" / "trajectories.json"
    for data in ([], {"no": 1}, {"trajectories": "x"}, {"trajectories": [1]}, {"trajectories": []},
                 {"trajectories": [{**good, "return": "high"}]}, {"trajectories": [{**good, "return": 1e999}]},
                 {"trajectories": [{**good, "states": [[0.0]]}]}, {"trajectories": [{**good, "terminated": 1}]}):
        stored.write_text(json.dumps(data))
        assert loop._Search._load_trajectories(search) == [good], data
    stored.write_text("[" * 100_000 + "]" * 100_000)
    assert loop._Search._load_trajectories(search) == [good]
    assert len(collected) == 10
    assert loop._Search._load_trajectories(search) == [good] and len(collected) == 10  # read back as stored


# ---------------------------------------------------------------------- run store
def test_store_drops_a_torn_line_redacts_and_refuses_other_runs(tmp_path: Path) -> None:
    config = {"env_id": "CartPole-v1", "steps": 100, "workers": 2}
    store = RunStore.open(tmp_path / "run", config, ("env_id", "steps"), resume=False, secrets=("sk-secret-123",))
    store.append({"type": "answer", "key": "it00_s00", "text": "key sk-secret-123 leaked"})
    with open(tmp_path / "run" / JOURNAL_FILE, "a") as journal:
        journal.write('{"type": "answer", "key": "it00_s01", "te')  # a kill -9 in the middle of a write
    reopened = RunStore.open(tmp_path / "run", {**config, "workers": 8}, ("env_id", "steps"), resume=True)
    assert reopened.get("answer", "it00_s00")["text"] == "key [redacted] leaked"
    assert reopened.get("answer", "it00_s01") is None
    reopened.append({"type": "answer", "key": "it00_s01", "text": "whole"})
    lines = (tmp_path / "run" / JOURNAL_FILE).read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["it00_s00", "it00_s01"]
    with pytest.raises(ValueError, match="already holds this search run; pass --resume"):
        RunStore.open(tmp_path / "run", config, ("env_id", "steps"), resume=False)
    with pytest.raises(ValueError, match="holds a different search run .*steps: 100 there, 200 now"):
        RunStore.open(tmp_path / "run", {**config, "steps": 200}, ("env_id", "steps"), resume=True)


def test_store_reads_a_shared_journal_and_config_of_any_content(tmp_path: Path) -> None:
    # a run folder from elsewhere: a line nested past the parser's limit, or not JSON, in the
    # middle of the journal is skipped (it stopped --resume with a RecursionError, or cut every
    # later record off the file); a config that is no object is one ValueError naming it
    config = {"env_id": "CartPole-v1", "steps": 100}
    store = RunStore.open(tmp_path / "run", config, ("env_id", "steps"), resume=False)
    store.append({"type": "answer", "key": "it00_s00", "text": "first"})
    with open(tmp_path / "run" / JOURNAL_FILE, "a") as journal:
        journal.write("[" * 100_000 + "]" * 100_000 + "\n" + "not\rjson\n")
        journal.write(json.dumps({"type": "answer", "key": "it00_s01", "text": "after"}) + "\n")
    reopened = RunStore.open(tmp_path / "run", config, ("env_id", "steps"), resume=True)
    assert reopened.get("answer", "it00_s00")["text"] == "first"
    assert reopened.get("answer", "it00_s01")["text"] == "after"
    assert (tmp_path / "run" / JOURNAL_FILE).read_bytes().count(b"\n") == 4  # nothing cut off
    for saved in ("[1, 2]", "[" * 100_000 + "]" * 100_000, "{", b"\xff"):
        path = tmp_path / "run" / "config.json"
        path.write_bytes(saved if isinstance(saved, bytes) else saved.encode())
        with pytest.raises(ValueError, match=r"config.json is not a search run's config"):
            RunStore.open(tmp_path / "run", config, ("env_id", "steps"), resume=True)


def test_store_opens_a_run_that_stopped_before_its_first_record_afresh(tmp_path: Path) -> None:
    config = {"env_id": "CartPole-v1", "steps": 100}
    RunStore.open(tmp_path / "run", config, ("env_id", "steps"), resume=False)  # then the start failed
    for resume in (False, True):
        RunStore.open(tmp_path / "run", {**config, "steps": 200}, ("env_id", "steps"), resume=resume)
        assert json.loads((tmp_path / "run" / "config.json").read_text())["steps"] == 200
    (tmp_path / "run" / "prescreen").mkdir()  # a started run's files: resumed, not overwritten
    with pytest.raises(ValueError, match="already holds this search run"):
        RunStore.open(tmp_path / "run", {**config, "steps": 200}, ("env_id", "steps"), resume=False)


# ------------------------------------------------- best_reward.py, load_reward, train
def write_reward_file(path: Path) -> Path:
    source = llm_reward.reference_programs("CartPole-v1")["human"].source
    path.write_text(reward_file_text(source, "CartPole-v1", ["Task: balance", "fitness 500"]))
    return path


def test_load_reward_as_gymnasium_and_batched_wrappers(tmp_path: Path) -> None:
    reward = llm_reward.load_reward(write_reward_file(tmp_path / "best_reward.py"))
    assert reward.env_id == "CartPole-v1"
    env = reward.wrap(gym.make("CartPole-v1"), trusted=True)
    env.reset(seed=0)
    _, value, _, _, info = env.step(1)
    assert set(info["reward_components"]) == {"extrinsic", "program/task", "program/shaping"}
    assert value == pytest.approx(info["reward_components"]["program/task"]
                                  + info["reward_components"]["program/shaping"], abs=1e-5)
    batched = reward.wrap(envs.make("CartPole-v1", num_envs=3, seed=0), trusted=True)
    batched.reset()
    _, rewards, _, _, info = batched.step(torch.ones(3, dtype=torch.int64))
    assert rewards.shape == (3,) and "program/shaping" in info["reward_components"]
    with pytest.raises(ValueError, match="written for CartPole-v1, not Pendulum-v1"):
        llm_reward.load_reward(tmp_path / "best_reward.py", "Pendulum-v1")
    with pytest.raises(TypeError, match="cannot wrap"):
        reward.wrap(object(), trusted=True)
    with pytest.raises(PermissionError, match="trusted=True"):
        reward.wrap(gym.make("CartPole-v1"))


def test_train_on_a_reward_program_file(tmp_path: Path) -> None:
    path = write_reward_file(tmp_path / "best_reward.py")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"hyperparameters": {"n_steps": 32, "n_epochs": 2}, "eval_episodes": 2}))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a busy machine makes several threads far slower for tiny networks
    try:
        code = rewardlab(["train", "--env", "CartPole-v1", "--reward-program", str(path), "--steps", "256",
                          "--num-envs", "4", "--config", str(config), "--logdir", str(tmp_path / "runs"),
                          "--no-progress"])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    metrics = json.loads((tmp_path / "runs" / "seed_0" / "metrics.json").read_text())
    assert metrics["status"] == "complete"
    assert json.loads((tmp_path / "runs" / "seed_0" / "config.json").read_text())["reward_program"] == str(path)


def finalist(sample: int, search_seed: float, extra: list[float | None]) -> Candidate:
    """A finalist whose search seed's checkpoints all score ``search_seed``, with ``extra`` seeds."""
    points = [Checkpoint(step=step, fitness=search_seed, success_rate=None, train_return=None)
              for step in (100, 200, 300)]
    run = TrainingRun("MountainCarContinuous-v0", True, search_seed, None, points, [SeedRun(0, points, 1.0)],
                      None, 300, 1.0, None, None, None, None, "")
    return Candidate(0, sample, source=f"# {sample}", result=run,
                     confirmation={50 + index: value for index, value in enumerate(extra)})


def test_finalists_are_compared_by_a_lower_bound_that_prefers_the_consistent_one() -> None:
    # the erratic one reaches the flag on two seeds of three (mean 63.7), the steady one on all (60)
    erratic, steady = finalist(0, 95.0, [96.0, 0.0]), finalist(1, 60.0, [59.0, 61.0])
    assert seed_fitness(erratic) == [95.0, 96.0, 0.0]
    assert sum(seed_fitness(erratic)) / 3 > sum(seed_fitness(steady)) / 3
    assert confirmed_fitness(steady) > confirmed_fitness(erratic)
    # mean 63.67 less the standard error of three seeds: sqrt(var / 3) with the sample variance
    values = [95.0, 96.0, 0.0]
    mean = sum(values) / 3
    error = (sum((v - mean) ** 2 for v in values) / 2 / 3) ** 0.5
    assert confirmed_fitness(erratic) == pytest.approx(mean - error)
    assert confirmed_fitness(finalist(2, 99.0, [99.0, None])) == -math.inf  # a failed seed loses
    assert confirmed_fitness(finalist(3, 42.0, [])) == 42.0  # one seed: its fitness


class AnchorExecutor(Executor):
    """Evaluations without training: the proposer's anchor (the human reward's structure)
    scores 50 on the training seed and 100 on every other; any other program 90 and 10."""

    def __init__(self, anchor: str) -> None:
        super().__init__(2, "test-anchor")
        self.anchor = anchor

    def _run(self, task: EvalTask) -> TrainingRun:
        fitness = (50.0 if task.seeds[0] == 0 else 100.0) if task.source == self.anchor else (
            90.0 if task.seeds[0] == 0 else 10.0)
        points = [Checkpoint(step=task.steps, fitness=fitness, success_rate=None, train_return=fitness)]
        return TrainingRun(task.env_id, True, fitness, None, points, [SeedRun(task.seeds[0], points, 1.0)], None,
                           task.steps, 0.1, None, None, None, None, task.source)

    def describe(self) -> str:
        return "scripted fitness (test)"


def test_the_anchor_is_always_a_finalist_so_the_search_returns_at_worst_the_human_reward(tmp_path: Path) -> None:
    from rewardlab.llm_reward.search import search
    from rewardlab.llm_reward.search.budgets import learner_discount
    from rewardlab.llm_reward.search.evolve import EvolveProposer
    from rewardlab.llm_reward.training.checking import check_answer

    config = SearchConfig(env_id="MountainCarContinuous-v0", task="reach the flag", proposer="evolve",
                          iterations=2, samples=3, steps=640, num_envs=4, final_seeds=0, finalists=2,
                          finalist_seeds=2, compile=False, early_stopping=False)
    gamma = learner_discount(config.training_kwargs(), "potential")
    references = llm_reward.reference_programs(config.env_id, gamma)
    anchor = EvolveProposer(llm_reward.describe(config.env_id), config.seed, references, config.task,
                            gamma=gamma).anchor()
    assert anchor is not None
    trained = check_answer(anchor, llm_reward.describe(config.env_id)).source  # as the search trains it
    assert trained is not None
    result = search(config, tmp_path / "run", executor=AnchorExecutor(trained))
    finalists = [c for c in result.candidates if c.confirmation is not None]
    # ranked last by its training seed, yet a finalist beside the best two, and the pick
    assert len(finalists) == 3 and result.best is not None and result.best.answer == anchor
    assert sorted(result.best.confirmation.values()) == [100.0, 100.0]


# ------------------------------------------------------- an offline search via the CLI
def test_evolve_search_through_the_cli_writes_every_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = rewardlab(["search", "--env", "CartPole-v1", "--task", "balance the pole", "--proposer", "evolve",
                      "--iterations", "2", "--samples", "2", "--final-seeds", "1", "--workers", "2",
                      "--no-progress", "--out", str(out), *TINY_FLAGS])
    printed = capsys.readouterr().out
    assert code == 0 and "best program:" in printed and "normalised score" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["candidates"] == 4 and summary["proposer"] == "evolve" and summary["llm_calls"] == 0
    assert set(summary["final"]) == {"best", "sparse", "human"}
    # the 3 best by their training seed (the default) trained again with 2 more seeds each
    finalists = summary["finalists"]
    assert len(finalists) == 3 and all(set(f["seeds"]) == {"50", "51"} for f in finalists)
    for f in finalists:
        assert f["mean"] == pytest.approx((f["search"] + sum(f["seeds"].values())) / 3)
        assert f["lower_bound"] <= f["mean"] + 1e-9
    chosen = next(f for f in finalists if f["key"] == summary["best"]["key"])
    assert chosen["lower_bound"] == max(f["lower_bound"] for f in finalists)
    assert ("| finalist | search seed(s) | seed 50 | seed 51 | mean | lower bound | chosen |"
            in (out / "report.md").read_text())
    assert sorted(p.name for p in (out / "finalists").iterdir()) == sorted(f["key"] for f in finalists)
    llm_reward.load_reward(out / "best_reward.py")
    rows = rewardlab(["compare", str(out / "final" / "best"), str(out / "final" / "human"),
                      str(out / "final" / "sparse"), "--out", str(tmp_path / "compare")])
    assert rows == 0 and (tmp_path / "compare" / "summary.md").exists()
    assert rewardlab(["compare", *map(str, sorted(out.glob("candidates/*/train"))), "--out",
                      str(tmp_path / "compare_candidates")]) == 0


# ------------------------------------------------------------------------- Ray
def test_ray_executor_on_a_local_instance(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    from rewardlab.llm_reward.search.executors import RayExecutor

    executor = RayExecutor(1, init_kwargs={"num_cpus": 1, "include_dashboard": False})
    try:
        source = llm_reward.reference_programs("CartPole-v1")["sparse"].source
        task = EvalTask("ray", source, "CartPole-v1", 256, (0,), str(tmp_path / "ray"), num_envs=4,
                        ppo_kwargs={"n_steps": 32, "n_epochs": 2}, num_checkpoints=2, eval_episodes=2,
                        timeout_s=120.0)
        result = executor.submit(task).result(timeout=300)
    finally:
        executor.shutdown()
    assert result.ok and result.fitness is not None
    assert result.run_dir == str(tmp_path / "ray")
    assert list((tmp_path / "ray" / "tensorboard").rglob("events.out.tfevents.*"))
    assert not ray.is_initialized()


def test_the_journal_computes_a_record_once_and_a_reopened_run_reads_it_back(tmp_path: Path) -> None:
    from rewardlab.llm_reward.search.store import RunStore

    calls = []

    def compute() -> dict:
        calls.append(1)
        return {"score": len(calls)}

    store = RunStore.open(tmp_path / "run", {"env_id": "CartPole-v1"}, ["env_id"], resume=False)
    assert store.journaled("prescreen", "it00_s00", compute) == ({"type": "prescreen", "key": "it00_s00", "score": 1}, True)
    assert store.journaled("prescreen", "it00_s00", compute) == ({"type": "prescreen", "key": "it00_s00", "score": 1}, False)
    reopened = RunStore.open(tmp_path / "run", {"env_id": "CartPole-v1"}, ["env_id"], resume=True)
    assert reopened.journaled("prescreen", "it00_s00", compute)[1] is False
    assert reopened.journaled("prescreen", "it00_s01", compute)[0]["score"] == 2
    assert len(calls) == 2
    # nothing to keep (an LLM call that failed for good): nothing journaled, asked again next time
    assert reopened.journaled("answer", "it00_s02", lambda: None) == (None, True)
    assert reopened.get("answer", "it00_s02") is None


def test_a_candidate_the_search_checked_is_trained_without_a_second_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import asdict

    from rewardlab.llm_reward.search.executors import run_task
    from rewardlab.llm_reward.training import run
    from rewardlab.llm_reward.training.checking import check_answer

    source = "def compute_reward(next_theta):\n    return -next_theta.abs(), {'upright': -next_theta.abs()}\n"
    checked = check_answer(f"```python\n{source}```", llm_reward.describe("CartPole-v1"))
    assert checked.program is not None

    def checked_again(*args: object) -> None:
        raise AssertionError("the program was read and checked a second time")

    monkeypatch.setattr(run, "check_source", checked_again)
    task = EvalTask("it00_s00", source, "CartPole-v1", 64, (0,), str(tmp_path / "train"), num_envs=4,
                    ppo_kwargs={"n_steps": 16}, num_checkpoints=1, eval_episodes=2, timeout_s=120,
                    program=asdict(checked.program))
    result = run_task(task)
    assert result.ok, result.failure
    assert result.source == checked.program.source and "program/upright" in result.curve[-1].components


def test_a_search_compiles_where_its_trainings_add_up_to_what_pays_for_the_compile() -> None:
    from rewardlab.common.compile_budget import AUTO_COMPILE_STEPS

    # the compile serves every training of the search: a default classic search has ~40
    default = SearchConfig(env_id="CartPole-v1", task="x", proposer="evolve")
    assert default.training_steps() == (5 * 4 + 3 * 2 + 3 * 5) * 60_000
    assert default.training_kwargs()["compile"] is True
    # a short trial search starts at once, eagerly, as a short rewardlab train run does
    trial = SearchConfig(env_id="CartPole-v1", task="x", proposer="evolve", iterations=1, samples=2,
                         final_seeds=0, finalists=0, steps=AUTO_COMPILE_STEPS // 2 - 1)
    assert trial.training_steps() < AUTO_COMPILE_STEPS and trial.training_kwargs()["compile"] is False
    told = SearchConfig(env_id="CartPole-v1", task="x", proposer="evolve", steps=256, compile=True)
    assert told.training_kwargs()["compile"] is True
    # the CLI leaves it to the rule unless a flag says otherwise
    from rewardlab.app.search import register_search

    parser = argparse.ArgumentParser()
    register_search(parser.add_subparsers())
    base = ["search", "--env", "CartPole-v1", "--task", "x", "--proposer", "evolve", "--out", "o"]
    assert parser.parse_args(base).compile is None
    assert parser.parse_args([*base, "--compile"]).compile is True
    assert parser.parse_args([*base, "--no-compile"]).compile is False
