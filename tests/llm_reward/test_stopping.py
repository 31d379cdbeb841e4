"""Early stopping of search candidates: the rule (Optuna's successive halving on the fitness at
rungs of the budget), the search around it (only candidates stop; finalists and the final
re-training never do; the report, the journal and the next prompt know who stopped, where and
with what fitness; a search resumed after a kill mid-rung stops the same candidates), and the
real evaluation killing a sandboxed training at its rung."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import signal
import threading
from pathlib import Path

import pytest

from rewardlab.app.cli import main as rewardlab
from rewardlab.llm_reward.clients import make_client
from rewardlab.llm_reward.search import SearchConfig, search
from rewardlab.llm_reward.search.executors import EvalTask, Executor
from rewardlab.llm_reward.training import Checkpoint, SeedRun, TrainingRun, evaluate
from rewardlab.llm_reward.training.stopping import (
    STOPPED,
    Stop,
    StopRule,
    population,
    rung_indices,
    rung_value,
)

pytest.importorskip("openai")
from hostile_answers import PLAIN  # noqa: E402

CHECKPOINTS = 10
RISING = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0)


# ------------------------------------------------------------------------------ the rule
def earlier(*first: float) -> StopRule:
    """A rule whose earlier candidates had ``first`` at the first rung and rose after."""
    curves = [[value + step for step in range(CHECKPOINTS)] for value in first]
    rungs = rung_indices(CHECKPOINTS)
    return StopRule(rungs, population(curves, rungs), CHECKPOINTS)


def test_the_rungs_are_a_ninth_and_a_third_of_the_default_checkpoints_and_never_the_last() -> None:
    assert rung_indices(10) == (0, 2)
    assert rung_indices(30) == (2, 9)
    assert rung_indices(1) == ()  # the only checkpoint is the end: nothing to save
    assert all(index < n - 1 for n in range(1, 40) for index in rung_indices(n))


def test_a_flat_laggard_stops_at_the_second_rung_and_a_good_one_never() -> None:
    rule = earlier(2.0, 3.0, 4.0, 5.0)
    flat = rule.stopper()
    assert flat.at(0, 1_000, 0.0) is None  # the first rung has no trend yet: nobody stops there
    assert flat.at(1, 2_000, 0.0) is None  # no rung
    stop = flat.at(2, 3_000, 0.0)
    assert stop is not None and stop.rung == 1 and stop.checkpoint == 2 and stop.fitness == 0.0
    assert stop.compared == 4 and stop.kept == 2 and stop.kept_from == 6.0 and stop.previous == 0.0
    assert stop.reason.startswith("stopped at a third of the budget (step 3,000) with fitness 0")
    assert stop.reason.endswith("and no higher than at the previous rung (fitness 0)")
    good = rule.stopper()
    assert [good.at(index, 1_000 * (index + 1), 20.0 + index) for index in range(CHECKPOINTS)] == [None] * CHECKPOINTS


def test_a_late_riser_behind_on_level_goes_on_while_the_level_alone_stops_it() -> None:
    rule = earlier(2.0, 3.0, 4.0, 5.0)  # the others at 4-7 by a third
    riser = rule.stopper()
    assert riser.at(0, 1_000, 0.0) is None
    assert riser.at(2, 3_000, 1.0) is None  # behind the others' level, but rising
    level_only = StopRule(rule.rungs, rule.population, CHECKPOINTS, trend=False).stopper()
    stop = level_only.at(0, 1_000, 0.0)  # ASHA alone: stopped at the first rung already
    assert stop is not None and stop.rung == 0 and stop.previous is None
    assert "previous rung" not in stop.reason


def test_a_candidate_that_stalls_after_the_first_rung_stops_at_the_second() -> None:
    rule = earlier(2.0, 3.0, 4.0, 5.0)
    stalled = rule.stopper()
    assert stalled.at(0, 1_000, 4.5) is None  # the better half at a ninth
    stop = stalled.at(2, 3_000, 4.5)  # the others reached 6-7 by a third; this one did not rise
    assert stop is not None and stop.rung == 1 and stop.share == "a third" and stop.compared == 4
    assert stop.kept_from == 6.0 and stop.fitness == 4.5
    # ahead on level, falling: goes on (only what is behind on both stops)
    ahead = rule.stopper()
    assert ahead.at(0, 1_000, 9.0) is None and ahead.at(2, 3_000, 8.0) is None


def test_too_few_to_compare_with_stops_nobody_and_ties_go_on() -> None:
    riser = earlier(5.0, 6.0).stopper()
    assert riser.at(0, 1_000, -100.0) is None and riser.at(2, 3_000, -100.0) is None  # below MIN_POPULATION
    assert StopRule((0, 2), (), CHECKPOINTS).stopper().at(0, 1_000, -100.0) is None  # the first iteration
    # all at the same floor (every candidate still at -200 on MountainCar): none is worse
    floor = earlier(0.0, 0.0, 0.0, 0.0)
    tied = StopRule(floor.rungs, tuple((0.0, 0.0) for _ in range(4)), CHECKPOINTS).stopper()
    assert tied.at(0, 1_000, 0.0) is None and tied.at(2, 3_000, 0.0) is None


def test_where_the_env_grades_partial_success_the_rung_compares_it_and_floor_ties_go_on() -> None:
    # four earlier candidates, every success rate 0 at both rungs: their partial success decides
    rule = StopRule(rung_indices(CHECKPOINTS), population([[rung_value(0.0, p)] * CHECKPOINTS
                                                           for p in (0.0, 0.1, 0.4, 0.5)], rung_indices(CHECKPOINTS)),
                    CHECKPOINTS)
    stopper = rule.stopper()
    assert stopper.at(0, 1_000, 0.0, 0.05) is None
    stop = stopper.at(2, 3_000, 0.0, 0.05)
    assert stop is not None and stop.partial_success == 0.05 and stop.kept_from == 0.4
    assert stop.reason.startswith("stopped at a third of the budget (step 3,000) with fitness 0 and partial "
                                  "success 0.05:") and "partial success 0.4 or more went on" in stop.reason
    assert Stop.from_dict(json.loads(json.dumps(stop.to_dict()))) == stop
    moved = rule.stopper()
    assert moved.at(0, 1_000, 0.0, 0.45) is None and moved.at(2, 3_000, 0.0, 0.45) is None  # past half of them
    # nobody moved yet: all at the floor, nobody stops
    floor = StopRule(rung_indices(CHECKPOINTS), ((0.0, 0.0),) * 4, CHECKPOINTS).stopper()
    assert floor.at(0, 1_000, 0.0, 0.0) is None and floor.at(2, 3_000, 0.0, 0.0) is None
    assert rung_value(3.0, None) == 3.0 and rung_value(0.0, 0.25) == 0.25


def test_the_rule_travels_as_json_and_decides_the_same() -> None:
    rule = earlier(2.0, 3.0, 4.0, 5.0)
    again = StopRule.from_dict(json.loads(json.dumps(rule.to_dict())))
    first, second = again.stopper(), rule.stopper()
    assert again == rule and first.at(0, 10, 1.0) == second.at(0, 10, 1.0)
    assert first.at(2, 30, 1.0) == second.at(2, 30, 1.0) is not None
    level = StopRule(rule.rungs, rule.population, CHECKPOINTS, trend=False)
    assert StopRule.from_dict(json.loads(json.dumps(level.to_dict()))) == level


# ------------------------------------------------------------------------- the search
class CurveExecutor(Executor):
    """Evaluations without training: a program's fitness curve is its ``# curve a b c ...``
    line; the task's stop rule is applied to it as the real evaluation applies it to the
    streamed checkpoints (the first seed's, up to the rung where it stops)."""

    def __init__(self) -> None:
        super().__init__(2, "test-curves")
        self.tasks: list[EvalTask] = []

    def _run(self, task: EvalTask) -> TrainingRun:
        self.tasks.append(task)
        found = re.search(r"# curve ([-\d. ]+)", task.source)
        values = [float(v) for v in found.group(1).split()] if found else list(RISING)
        points = [Checkpoint(step=(index + 1) * task.steps // len(values), fitness=value, success_rate=None,
                             train_return=value, components={"program/upright": 0.5}, reward=0.1)
                  for index, value in enumerate(values)]
        stop = None
        if task.stop_rule is not None:
            stopper = StopRule.from_dict(task.stop_rule).stopper()
            for index, point in enumerate(points):
                stop = stopper.at(index, point.step, point.fitness)
                if stop is not None:
                    points = points[:index + 1]
                    break
        seeds = [SeedRun(task.seeds[0], points, None if stop else 1.0)]
        if stop is not None:
            from rewardlab.llm_reward.training import Failure

            return TrainingRun(task.env_id, False, None, None, points, seeds, Failure(STOPPED, stop.reason),
                              task.steps, 0.1, None, None, None, None, task.source, stopped=stop)
        return TrainingRun(task.env_id, True, values[-1], None, points, seeds, None, task.steps, 0.1, None,
                          None, None, None, task.source)

    def describe(self) -> str:
        return "scripted curves (test)"


def program(*curve: float) -> str:
    return f"```python\n# curve {' '.join(str(v) for v in curve)}\n{PLAIN}\n```\n"


FLAT = (0.0,) * CHECKPOINTS
STALLED = (4.5, 4.5, 4.5, 4.5, 4.5, 4.5, 4.5, 4.5, 4.5, 4.5)
GOOD = tuple(20.0 + index for index in range(CHECKPOINTS))
ANSWERS = [
    program(*(2.0 + s for s in range(CHECKPOINTS))), program(*(3.0 + s for s in range(CHECKPOINTS))),
    program(*(4.0 + s for s in range(CHECKPOINTS))), program(*(5.0 + s for s in range(CHECKPOINTS))),
    program(*FLAT), program(*GOOD), program(*STALLED), program(*FLAT),                     # iteration 2
    program(*FLAT), program(*GOOD), program(*FLAT), program(*FLAT),                        # iteration 3
]


def curve_config(answers: Path, **changes: object) -> SearchConfig:
    settings = {"steps": 900, "num_envs": 4, "ppo_kwargs": {"n_steps": 32}, "num_checkpoints": CHECKPOINTS,
                "eval_episodes": 2, "compile": False, "finalists": 3, "finalist_seeds": 1, "final_seeds": 1,
                **changes}
    return SearchConfig("CartPole-v1", "balance the pole", llm=f"replay:{answers}", iterations=3, samples=4,
                        **settings)  # type: ignore[arg-type]


def run_curves(tmp_path: Path, out: str, resume: bool = False, **changes: object) -> tuple[object, CurveExecutor]:
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"text": text}) + "\n" for text in ANSWERS))
    executor = CurveExecutor()
    result = search(curve_config(answers, **changes), tmp_path / out, client=make_client(f"replay:{answers}"),
                    executor=executor, llm_concurrency=1, resume=resume)
    return result, executor


def stops(result: object) -> dict[str, tuple[int, float]]:
    return {c.key: (c.result.stopped.rung, c.result.stopped.fitness)  # type: ignore[attr-defined]
            for c in result.candidates if c.result is not None and c.result.stopped}  # type: ignore[attr-defined]


def test_the_search_stops_flat_candidates_never_the_references_or_finalists(tmp_path: Path) -> None:
    result, executor = run_curves(tmp_path, "run")
    statuses = [c.status for c in result.candidates]  # type: ignore[attr-defined]
    assert statuses[:4] == ["ok"] * 4  # the first iteration has no one to be compared with
    assert statuses[4:] == ["stopped", "ok", "stopped", "stopped", "stopped", "ok", "stopped", "stopped"]
    # the flat ones too at the second rung: the first has no trend to judge yet
    assert stops(result) == {"it01_s00": (1, 0.0), "it01_s02": (1, 4.5), "it01_s03": (1, 0.0),
                             "it02_s00": (1, 0.0), "it02_s02": (1, 0.0), "it02_s03": (1, 0.0)}
    # every candidate's task carried a rule; no finalist's and no final training's did
    by_key = {task.key: task for task in executor.tasks}
    assert all(by_key[c.key].stop_rule is not None for c in result.candidates)  # type: ignore[attr-defined]
    others = [task for task in executor.tasks if "/seed_" in task.key]
    assert others and all(task.stop_rule is None for task in others)
    assert {task.key.split("/")[0] for task in others} >= {"sparse", "human"}  # the references trained in full
    assert result.best is not None and result.best.key == "it01_s01"  # type: ignore[attr-defined]

    # the journal, the report and the next prompt know who stopped, where and with what fitness
    journal = [json.loads(line) for line in (result.out / "journal.jsonl").read_text().splitlines()]  # type: ignore[attr-defined]
    stopped = {r["key"]: r["result"]["stopped"] for r in journal if r["type"] == "evaluation"
               and r["result"].get("stopped")}
    assert stopped["it01_s02"]["share"] == "a third" and stopped["it01_s02"]["fitness"] == 4.5
    summary = json.loads((result.out / "summary.json").read_text())  # type: ignore[attr-defined]
    assert [item["key"] for item in summary["early_stopping"]["stopped"]] == sorted(stops(result))
    assert summary["early_stopping"]["steps_saved"] > 0
    report = (result.out / "report.md").read_text()  # type: ignore[attr-defined]
    assert "Early stopping: 6 candidate(s) stopped" in report and "it01_s02 at a third" in report
    # a stopped candidate is counted apart from the failures: candidates, trained, stopped, failed
    assert result.stopped_early == 6 and "stopped" not in result.failures  # type: ignore[attr-defined]
    assert "| 12 | 6 | 6 | 0 |" in report
    prompt = [r for r in journal if r["type"] == "prompt"][-1]["messages"][-1]["content"]
    assert "it01_s02: `stopped at a third of the budget (step 270) with fitness 4.5" in prompt
    assert "it01_s00: `stopped at a third of the budget (step 270) with fitness 0" in prompt


def test_without_early_stopping_every_candidate_trains_to_the_end(tmp_path: Path) -> None:
    result, executor = run_curves(tmp_path, "run", early_stopping=False)
    assert all(task.stop_rule is None for task in executor.tasks)
    assert [c.status for c in result.candidates] == ["ok"] * 12  # type: ignore[attr-defined]
    assert "Early stopping: off" in (result.out / "report.md").read_text()  # type: ignore[attr-defined]


def test_a_search_resumed_after_a_kill_mid_rung_stops_and_continues_the_same_candidates(tmp_path: Path) -> None:
    straight, _ = run_curves(tmp_path, "straight")
    # the journal of a search killed while iteration 2's candidates were training: two had
    # been journaled, the others were mid-rung, so nothing of their training was
    killed = tmp_path / "killed"
    shutil.copytree(straight.out, killed)  # type: ignore[attr-defined]
    kept, journaled = [], []
    for line in (killed / "journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] in ("finalist", "final") or (record["type"] == "evaluation" and (
                record["key"].startswith("it02") or (record["key"].startswith("it01") and len(journaled) == 2))):
            continue
        if record["type"] == "evaluation" and record["key"].startswith("it01"):
            journaled.append(record["key"])
        kept.append(line)
    (killed / "journal.jsonl").write_text("\n".join(kept) + "\n")
    for name in ("report.md", "summary.json"):
        (killed / name).unlink(missing_ok=True)
    resumed, executor = run_curves(tmp_path, "killed", resume=True)
    assert stops(resumed) == stops(straight)
    assert [c.status for c in resumed.candidates] == [c.status for c in straight.candidates]  # type: ignore[attr-defined]
    # trained again: what was not journaled (iteration 2's other two, iteration 3, finalists, final)
    retrained = {task.key for task in executor.tasks if "/" not in task.key and ":" not in task.key}
    assert retrained == {f"it01_s{s:02d}" for s in range(4)} - set(journaled) | {f"it02_s{s:02d}" for s in range(4)}
    assert resumed.best.key == straight.best.key  # type: ignore[attr-defined]


class KilledMidRung(CurveExecutor):
    """The scripted evaluations, until the stalled candidate of iteration 2 has passed its first
    rung and not reached its second: there the whole process is killed (SIGKILL, as ``kill -9``
    would), whatever the other worker thread is writing."""

    def _run(self, task: EvalTask) -> TrainingRun:
        if task.key == "it01_s02":
            stopper = StopRule.from_dict(task.stop_rule).stopper()  # type: ignore[arg-type]
            assert stopper.at(0, task.steps // CHECKPOINTS, STALLED[0]) is None  # past the first rung
            os.kill(os.getpid(), signal.SIGKILL)
        return super()._run(task)


def _search_killed_mid_rung(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    search(curve_config(answers), tmp_path / "killed", client=make_client(f"replay:{answers}"),
           executor=KilledMidRung(), llm_concurrency=1)


def test_a_search_killed_with_sigkill_mid_rung_resumes_and_stops_the_same_candidates(tmp_path: Path) -> None:
    straight, _ = run_curves(tmp_path, "straight")  # also writes the answers file the killed one reads
    child = multiprocessing.get_context("fork").Process(target=_search_killed_mid_rung, args=(tmp_path,))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    written = [json.loads(line) for line in (tmp_path / "killed" / "journal.jsonl").read_text().splitlines()]
    evaluated = {record["key"] for record in written if record["type"] == "evaluation"}
    assert "it00_s00" in evaluated and "it01_s02" not in evaluated  # killed while it trained
    assert not [record for record in written if record["type"] == "finalist"
                or (record["type"] == "final" and record["label"] == "best")]
    # the replayed LLM goes on where it was: the answers the killed search had asked for are journaled
    asked = sum(record["type"] == "answer" for record in written)
    assert asked == 8
    rest = tmp_path / "rest.jsonl"
    rest.write_text("".join(json.dumps({"text": text}) + "\n" for text in ANSWERS[asked:]))
    executor = CurveExecutor()
    resumed = search(curve_config(tmp_path / "answers.jsonl"), tmp_path / "killed", client=make_client(f"replay:{rest}"),
                     executor=executor, llm_concurrency=1, resume=True)
    assert stops(resumed) == stops(straight) and stops(resumed)["it01_s02"] == (1, 4.5)
    assert [c.status for c in resumed.candidates] == [c.status for c in straight.candidates]  # type: ignore[attr-defined]
    assert "it01_s02" in {task.key for task in executor.tasks}  # trained again, from its start
    kept = evaluated | {record["key"] for record in written if record["type"] == "final"}
    assert not kept & {task.key for task in executor.tasks}  # journaled before the kill: kept
    assert resumed.best.key == straight.best.key  # type: ignore[attr-defined]


def test_the_cli_switches_early_stopping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rewardlab.app.search import _config

    parser_args = ["search", "--env", "CartPole-v1", "--task", "x", "--proposer", "evolve", "--out", "o"]
    import argparse

    from rewardlab.app.search import register_search

    parser = argparse.ArgumentParser()
    register_search(parser.add_subparsers())
    assert _config(parser.parse_args(parser_args)).early_stopping is True
    assert _config(parser.parse_args([*parser_args, "--no-early-stopping"])).early_stopping is False
    with pytest.raises(SystemExit):
        rewardlab(["search", "--help"])
    assert "--no-early-stopping" in capsys.readouterr().out


# -------------------------------------------------------------- the real evaluation
BALANCE = '''
def compute_reward(next_theta, next_x):
    upright = 1.0 - (next_theta / 0.2095) ** 2
    return upright, {"upright": upright}
'''


@pytest.mark.parametrize("bar", [1e6, -1e6])
def test_the_sandboxed_training_is_killed_at_its_rung_when_the_rule_says_so(tmp_path: Path, bar: float) -> None:
    # three earlier candidates far above (or below); the level alone, so that the first rung
    # decides whatever the training's trend (the kill is what is tested here)
    rule = StopRule(rung_indices(5), ((bar, bar),) * 3, 5, trend=False)
    result = evaluate(BALANCE, "CartPole-v1", steps=640, seeds=(0, 1), num_envs=4, num_checkpoints=5,
                      eval_episodes=2, ppo_kwargs={"n_steps": 32, "n_epochs": 1}, run_dir=tmp_path / "run",
                      stop_rule=rule, timeout_s=120.0)
    if bar > 0:
        assert not result.ok and result.failure is not None and result.failure.kind == STOPPED
        assert result.stopped is not None and result.stopped.rung == 0 and result.stopped.checkpoint == 0
        assert result.failure.reason.startswith("stopped at 1/5 of the budget")
        # only the first seed, up to the rung: the kill landed before the rest trained
        assert [len(run.checkpoints) for run in result.seeds] == [1]
        assert result.seeds[0].checkpoints[0].fitness == result.stopped.fitness
        assert TrainingRun.from_dict(json.loads(result.to_json())).stopped == result.stopped
    else:
        assert result.ok and result.stopped is None and [len(run.checkpoints) for run in result.seeds] == [5, 5]


def test_the_offline_proposer_learns_from_a_stopped_candidate_as_worse_than_any_trained_one() -> None:
    from rewardlab.llm_reward.search.evolve import _stopped_or_rank
    from rewardlab.llm_reward.search.records import Candidate

    def candidate(sample: int, curve: tuple[float, ...], stop_at: int | None) -> Candidate:
        points = [Checkpoint(step=index, fitness=value, success_rate=None, train_return=value)
                  for index, value in enumerate(curve)]
        stop = None
        if stop_at is not None:
            rule = earlier(2.0, 3.0, 4.0, 5.0)
            # a stop at the first rung is the level-alone rule's (a journal from before the trend)
            stop = (rule if stop_at else StopRule(rule.rungs, rule.population, CHECKPOINTS, trend=False)).stopper()
            found = [stop.at(index, index, value) for index, value in enumerate(curve[:stop_at + 1])][-1]
            assert found is not None
            stop = found
        ok = stop is None
        result = TrainingRun("CartPole-v1", ok, curve[-1] if ok else None, None, points, [], None, 10, 0.1, None,
                            None, None, None, "", stopped=stop)
        return Candidate(1, sample, result=result)

    trained_low = candidate(0, (1.0,) * CHECKPOINTS, None)
    stopped_late = candidate(1, STALLED[:3], 2)
    stopped_early = candidate(2, FLAT[:1], 0)
    ranked = sorted([trained_low, stopped_early, stopped_late], key=_stopped_or_rank)
    assert [c.sample for c in ranked] == [2, 1, 0]


def test_a_run_saved_before_early_stopping_existed_resumes_without_it(tmp_path: Path) -> None:
    result, _ = run_curves(tmp_path, "old", early_stopping=False)
    config_file = result.out / "config.json"  # type: ignore[attr-defined]
    saved = json.loads(config_file.read_text())
    del saved["early_stopping"]
    config_file.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="early_stopping: False there, True now"):
        run_curves(tmp_path, "old", resume=True)
    resumed, executor = run_curves(tmp_path, "old", resume=True, early_stopping=False)
    assert executor.tasks == [] and [c.status for c in resumed.candidates] == ["ok"] * 12  # type: ignore[attr-defined]


# ------------------------------------------------------ the references in the background
class Recorded(Executor):
    """Evaluations that only record their order; the first waits until it is let go."""

    def __init__(self) -> None:
        super().__init__(1, "test-order")
        self.order: list[str] = []
        self.hold = threading.Event()
        self.started = threading.Event()

    def _run(self, task: EvalTask) -> TrainingRun:
        self.started.set()
        if not self.order:
            self.hold.wait(30)
        self.order.append(task.key)
        return TrainingRun(task.env_id, True, 1.0, None, [], [], None, task.steps, 0.0, None, None, None, None, "")

    def describe(self) -> str:
        return "recorded order (test)"


def make(key: str) -> EvalTask:
    return EvalTask(key=key, source="", env_id="CartPole-v1", steps=1, seeds=(0,), run_dir="", num_envs=1,
                    ppo_kwargs={}, num_checkpoints=1, eval_episodes=1, timeout_s=1.0)


def test_a_background_evaluation_starts_only_when_nothing_else_waits_for_a_slot() -> None:
    executor = Recorded()
    done: list[str] = []
    futures = [executor.submit(make("first")), executor.submit(make("later-1"), background=True),
               executor.submit(make("now-1")), executor.submit(make("later-2"), background=True),
               executor.submit(make("now-2"), on_done=lambda result: done.append(result.env_id))]
    executor.hold.set()
    for future in futures:
        future.result(30)
    assert executor.order == ["first", "now-1", "now-2", "later-1", "later-2"]
    assert done == ["CartPole-v1"]  # on_done ran before its future had the result
    executor.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        executor.submit(make("too late"))


def test_the_references_final_seeds_queue_once_the_first_candidate_trains_and_train_once(tmp_path: Path) -> None:
    result, executor = run_curves(tmp_path, "run")
    keys = [task.key for task in executor.tasks]
    references = [key for key in keys if key.startswith(("sparse/", "human/"))]
    assert references and len(references) == len(set(references))
    assert keys[0].startswith("it00_")  # the first free slot is the first candidate's, not a reference's
    # each reference seed trained before the best program's final seeds, journaled as a final training
    assert max(keys.index(key) for key in references) < min(i for i, key in enumerate(keys) if key.startswith("best:"))
    journal = [json.loads(line) for line in (result.out / "journal.jsonl").read_text().splitlines()]  # type: ignore[attr-defined]
    assert sorted(r["key"] for r in journal if r["type"] == "final" and r["label"] != "best") == sorted(references)
    assert set(result.final) == {"best", "sparse", "human"}  # type: ignore[attr-defined]
    # a resumed search trains none of them again
    again, executor = run_curves(tmp_path, "run", resume=True)
    assert executor.tasks == [] and again.final["human"].fitness == result.final["human"].fitness  # type: ignore[attr-defined]


def test_a_shut_down_executor_cancels_what_waits_and_a_failing_on_done_is_the_callers_error() -> None:
    from concurrent.futures import as_completed

    from rewardlab.llm_reward.search.executors import CallbackError

    executor = Recorded()
    first = executor.submit(make("first"))
    assert executor.started.wait(5)  # running: shutdown lets it finish
    waiting = [executor.submit(make("queued")), executor.submit(make("background"), background=True)]
    executor.shutdown()
    assert [future.cancelled() for future in as_completed(waiting, timeout=5)] == [True, True]  # no hang
    executor.hold.set()
    assert first.result(30).ok and executor.order == ["first"]

    def full_disk(result: TrainingRun) -> None:
        raise OSError("No space left on device")

    failing = Recorded()
    failing.hold.set()
    error = failing.submit(make("journaled"), on_done=full_disk).exception(30)
    assert isinstance(error, CallbackError) and isinstance(error.__cause__, OSError)
    failing.shutdown()
