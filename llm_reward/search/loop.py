"""The reward-code search: propose programs, evaluate them in parallel, reflect, repeat.

Each iteration asks the proposer (an LLM in Eureka or Text2Reward mode, or the evolve
proposer) for ``samples`` programs. Every candidate goes through the same pipeline, in
its own thread: answer -> program (static checks) -> prescreen (optional, sandboxed) ->
training and fitness (:func:`rewardlab.llm_reward.evaluate` through an executor: local sandboxed
processes or Ray). Every step's outcome is appended to the run's journal as soon as it
exists (:mod:`rewardlab.llm_reward.search.store`), and a resumed search takes from the journal what
is there instead of asking or computing again. The next prompt is built from the
results in sample order, so the same answers and seeds give the same search.

At the end the best program (highest task fitness, earliest on ties) is trained again
with ``final_seeds`` new seeds next to the env's own reward (the sparse reference, the env's
dense reward where it pays one) and the human reference, and scored with Eureka's normalised
score ``(best - sparse) / |human - sparse|`` where the two references are told apart
(:func:`~rewardlab.llm_reward.search.verdict.normalized_score`).

    from rewardlab.llm_reward.search import SearchConfig, search

    config = SearchConfig(env_id="CartPole-v1", task="balance the pole", proposer="evolve",
                          iterations=3, samples=4, steps=20_000)
    result = search(config, "runs/search_cartpole")
    print(result.best.key, result.best.fitness, result.normalized_score)
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rewardlab.envs.description_files import description_data, env_source, use_description
from rewardlab.envs.descriptions import EnvDescription, describe, registered_descriptions
from rewardlab.llm_reward.clients import ChatClient, Completion, LLMCallFailed, Usage, typed_usage
from rewardlab.llm_reward.programs.program import RewardProgram
from rewardlab.llm_reward.programs.references import (
    SHAPING,
    own_reward_program,
    reference_programs,
    registered_reference_programs,
)
from rewardlab.llm_reward.programs.text import fenced, sanitize
from rewardlab.llm_reward.sandbox.forkserver import server_startups
from rewardlab.llm_reward.search import board
from rewardlab.llm_reward.search.budgets import learner_discount
from rewardlab.llm_reward.search.config import IDENTITY, SearchConfig
from rewardlab.llm_reward.search.evolve import EvolveProposer
from rewardlab.llm_reward.search.evolve_random import EvolveRandomProposer
from rewardlab.llm_reward.search.examples import most_similar
from rewardlab.llm_reward.search.executors import CallbackError, EvalTask, Executor, LocalExecutor
from rewardlab.llm_reward.search.feedback import FeedbackSource
from rewardlab.llm_reward.search.prescreen import (
    collect_trajectories,
    prescreen,
    stored_trajectories,
)
from rewardlab.llm_reward.search.progress import Progress
from rewardlab.llm_reward.search.prompts import (
    candidate_line,
    conversation,
    failure_details,
    feedback_prompt,
    task_prompt,
)
from rewardlab.llm_reward.search.records import (
    LLM_FAILURE,
    PRESCREEN_FAILURE,
    SEARCH_FAILURE,
    Candidate,
    FinalScore,
    PrescreenScore,
    SearchResult,
    best_of,
    confirmed_fitness,
    journal_runs,
    journaled_cost,
    journaled_count,
    journaled_run,
    late_fitness,
    rank_key,
)
from rewardlab.llm_reward.search.reflection import reflect, reward_signals
from rewardlab.llm_reward.search.report import render
from rewardlab.llm_reward.search.store import RunStore
from rewardlab.llm_reward.search.verdict import normalized_score
from rewardlab.llm_reward.training import Failure, TrainingRun
from rewardlab.llm_reward.training.checking import check_answer
from rewardlab.llm_reward.training.stopping import StopRule, population, rung_indices

__all__ = ["SearchConfig", "SearchResult", "best_candidate", "search"]

FINAL_SEED_BASE = 100
FINALIST_SEED_BASE = 50


def best_candidate(candidates: Sequence[Candidate]) -> Candidate | None:
    """The trained candidate with the highest fitness, then success rate, then training return
    (the earliest on ties), or ``None``; the progress line names the same one.

    :param candidates: any candidates.
    """
    return best_of(candidates)


def searchable_description(env_id: str, data: dict[str, Any] | None = None) -> EnvDescription:
    """The description of an env the search works on.

    :param env_id: a batched env, or any id Gymnasium can make.
    :param data: a description file's checked data, used in place of the env's own.
    :raises ValueError: no env can be made for the id (naming what it may need).
    """
    from rewardlab import envs

    envs.check_id(env_id)
    if data is not None:
        return use_description(data)
    return describe(env_id)  # the registered one, or one derived from the env's spaces


@dataclass(frozen=True)
class _Proposal:
    """Where a candidate's answer comes from: the evolve proposer's program (``source`` and
    ``genome``), or an LLM request with the prompt saved under ``prompt_key``."""

    prompt_key: str | None = None
    genome: list[dict[str, Any]] | None = None
    source: str | None = None


@dataclass(frozen=True)
class _SeedJob:
    """One training of a program on one seed after the iterations (a finalist's, a final one)."""

    key: str
    source: str
    seed: int
    run_dir: Path
    fields: dict[str, Any]  # more of its journal record


class _Search:
    """One run of :func:`search` (see its docstring for the parameters)."""

    def __init__(
        self,
        config: SearchConfig,
        out: str | os.PathLike[str],
        client: ChatClient | None,
        executor: Executor | None,
        workers: int | None,
        feedback: FeedbackSource | None,
        resume: bool,
        progress: Progress | None,
        llm_concurrency: int,
    ):
        config.check()
        for name, value in (("workers", workers), ("llm_concurrency", llm_concurrency)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {name}={value!r}")
        if (config.proposer == "llm") != (client is not None):
            raise ValueError("pass a client exactly when the proposer is the LLM")
        self.config = config
        # a built-in description (not a file's) makes the env's source redundant in the prompt
        built_in = (config.description is None and config.env_id in registered_descriptions()
                    and description_data(config.env_id) is None)
        self.description = searchable_description(config.env_id, config.description)
        has_references = config.env_id in registered_reference_programs()
        # an env without reference programs of its own is compared with the reward it pays
        # potential-based terms use the discount the candidates train with, or they do not telescope
        training = config.training_kwargs()
        self.references = (reference_programs(config.env_id, learner_discount(training, SHAPING))
                           if has_references else {"sparse": own_reward_program()})
        if config.prescreen != "off" and "human" not in self.references:
            raise ValueError(
                f"--prescreen trains a policy on {config.env_id}'s human reference reward, and it has "
                "none (rewardlab.llm_reward.register_reference_programs)"
            )
        self.client = client
        if client is not None:
            client.check()  # before anything is written: a corrected command starts afresh
        secrets = client.secrets if client is not None else ()
        saved_config = {**config.to_dict(), "llm_endpoint": client.describe() if client else None}
        self.store = RunStore.open(out, saved_config, IDENTITY, resume, secrets)
        self.feedback = feedback
        self.progress = progress or Progress(config.iterations, config.samples, enabled=False)
        self.progress.secrets = secrets
        self._own_executor = executor is None
        self.executor = executor or LocalExecutor(max(1, os.cpu_count() or 1) if workers is None else workers)
        self._llm_pool = ThreadPoolExecutor(llm_concurrency, thread_name_prefix="rewardlab-llm") if client else None
        self._evolve: EvolveRandomProposer | EvolveProposer | None = None
        if config.proposer == "evolve":
            self._evolve = EvolveProposer(self.description, config.seed, self.references, config.task,
                                              gamma=learner_discount(training, "potential"))
        elif config.proposer == "evolve-random":
            self._evolve = EvolveRandomProposer(self.description, config.seed, self.references,
                                          gamma=learner_discount(training, "potential"))
        examples = most_similar(config.task, config.env_id, config.shots) if config.mode == "text2reward" else []
        show_source = config.env_source == "always" or (config.env_source == "auto" and not built_in)
        source = env_source(config.env_id) if show_source else ""
        self._first_prompt = task_prompt(self.description, config.task, examples, source)
        self._trajectories: list[dict[str, Any]] | None = None
        self._stop_rule: StopRule | None = None
        # the references' final trainings and what was queued for them at the start
        self._references: list[_SeedJob] = []
        self._references_ahead: list[TrainingRun | Future[TrainingRun]] = []
        self._references_lock = threading.Lock()
        self._references_queued = False
        self._in_background: set[Future[TrainingRun]] = set()

    # ------------------------------------------------------------------ the run
    def run(self) -> SearchResult:
        start = time.monotonic()
        try:
            self._references = self._reference_jobs()
            if self.config.prescreen != "off":
                self._trajectories = self._load_trajectories()
            if self.config.training_kwargs().get("compile"):
                self.progress.note("PPO's compiled graphs: the sandbox loads them before the first candidate "
                                   "trains (the first search of a budget on this machine compiles them, tens "
                                   "of seconds; --no-compile trains eagerly)")
            history: list[Candidate] = []
            for iteration in range(self.config.iterations):
                history += self._iteration(iteration, history)
                self._log_iteration(iteration, history)
            self._queue_references()  # where no candidate trained now (a resumed search)
            best = self._confirm(history)
            final = self._final(best)
            result = self._result(history, best, final, time.monotonic() - start)
            for name, text in render(result).items():
                self.store.write_text(name, text)
            return result
        finally:
            for future in self._in_background:
                future.cancel()  # what has not started (the search failed or was stopped)
            if self._llm_pool is not None:
                self._llm_pool.shutdown(wait=False, cancel_futures=True)
            if self._own_executor:
                self.executor.shutdown()
            self.progress.close()

    def _iteration(self, iteration: int, history: list[Candidate]) -> list[Candidate]:
        samples = self.config.samples
        self.progress.start_iteration(iteration, samples)
        candidates = [Candidate(iteration, sample) for sample in range(samples)]
        self._stop_rule = self._rule(history)
        if self._evolve is not None:
            proposals = [_Proposal(genome=genome, source=source)
                         for genome, source in self._evolve.propose(iteration, samples, history)]
            answers: dict[int, Future[Completion]] = {}
        else:
            messages = self._messages(iteration, history)
            proposals = [_Proposal(prompt_key=self._save_prompt(iteration, messages))] * samples
            llm_pool = self._llm_pool
            assert llm_pool is not None
            # Submitted in sample order: with one request in flight, answers come in that order.
            answers = {
                c.sample: llm_pool.submit(self._ask, messages)
                for c in candidates if self.store.get("answer", c.key) is None
            }
        with ThreadPoolExecutor(samples, thread_name_prefix="rewardlab-candidate") as pool:
            futures = [pool.submit(self._candidate, c, proposals[c.sample], answers.get(c.sample))
                       for c in candidates]
            errors = [future.exception() for future in futures]
        for error in errors:
            if error is not None:
                raise error
        return candidates

    def _rule(self, history: list[Candidate]) -> StopRule | None:
        """The early-stopping rule of the next iteration's candidates: compared with the earlier
        iterations' (all finished by now, so the rule is the same in a resumed search)."""
        if not self.config.early_stopping:
            return None
        rungs = rung_indices(self.config.num_checkpoints)
        curves = [c.result.rung_values() for c in history if c.result is not None]
        return StopRule(rungs, population(curves, rungs), self.config.num_checkpoints)

    def _ask(self, messages: list[dict[str, str]]) -> Completion:
        assert self.client is not None
        return self.client.complete(messages)

    # --------------------------------------------------------------- prompts
    def _messages(self, iteration: int, history: list[Candidate]) -> list[dict[str, str]]:
        best = best_candidate(history)
        if iteration == 0:
            return conversation(self._first_prompt, None, None)
        last = [c for c in history if c.iteration == iteration - 1]
        human = self._human_feedback(iteration, best, last) if self.config.mode == "text2reward" else None
        return conversation(self._first_prompt, best, feedback_prompt(self.config.mode, last, best, human))

    def _save_prompt(self, iteration: int, messages: list[dict[str, str]]) -> str:
        digest = hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:12]
        key = f"it{iteration:02d}_{digest}"
        self.store.journaled("prompt", key, lambda: {"iteration": iteration, "messages": messages})
        return key

    def _human_feedback(self, iteration: int, best: Candidate | None, last: list[Candidate]) -> str | None:
        def ask() -> dict[str, Any] | None:
            if self.feedback is None:
                return None
            lines = ["Results so far:", *(f"- {candidate_line(c)}" for c in last)]
            details = failure_details(last)
            lines += [] if details is None else ["", details]
            if best is not None and best.result is not None:
                lines += ["", f"Best program so far ({best.key}):",
                          *fenced((best.source or "").rstrip(), language="python"), reflect(best.result, best.signals)]
            # shown on a terminal: no escape sequence of a program's text reaches it
            text = self.feedback.ask(iteration, sanitize("\n".join(lines)))
            return {"iteration": iteration, "source": self.feedback.name, "text": text}

        record, _ = self.store.journaled("feedback", f"it{iteration:02d}", ask)
        text = None if record is None else record.get("text")
        return text if isinstance(text, str) else None

    # -------------------------------------------------------- one candidate
    def _candidate(self, candidate: Candidate, proposal: _Proposal, answer: Future[Completion] | None) -> None:
        trained = False
        try:
            if not self._answer(candidate, proposal, answer):
                return
            program = self._program(candidate)
            if program is None:
                return
            if self.config.prescreen != "off":
                score = self._prescreen(candidate, program)
                if self.config.prescreen == "reject" and not score.passed:
                    candidate.failure = score.failure or Failure(PRESCREEN_FAILURE, score.finding)
                    return
            trained = self._evaluate(candidate, program)
        except Exception as error:  # noqa: BLE001 - one candidate's trouble is its failure, never the search's end
            candidate.failure = Failure(SEARCH_FAILURE, f"the search could not process this candidate "
                                                        f"({_exception_text(error)})")
        finally:
            self.progress.finished(candidate.key, trained, candidate)

    def _answer(self, candidate: Candidate, proposal: _Proposal, answer: Future[Completion] | None) -> bool:
        """Fill in the candidate's answer (saved, or new and saved now); False if there is none."""
        key = candidate.key

        def receive() -> dict[str, Any] | None:
            if proposal.source is not None:
                return {"iteration": candidate.iteration, "sample": candidate.sample,
                        "proposer": self.config.proposer, "text": proposal.source, "genome": proposal.genome}
            assert answer is not None
            try:
                completion = answer.result()
            except LLMCallFailed as error:  # journaled as what it is: the answer is asked for again on --resume
                self.store.append({"type": "llm_error", "key": key, "prompt": proposal.prompt_key,
                                   "error": str(error), "tries": error.tries})
                candidate.failure = Failure(LLM_FAILURE, str(error))
                return None
            self.progress.spent(completion.usage.total_tokens, completion.cost_usd)
            return {"iteration": candidate.iteration, "sample": candidate.sample, "proposer": "llm",
                    "prompt": proposal.prompt_key, **completion.to_dict()}

        record, _ = self.store.journaled("answer", key, receive)
        if record is None:
            return False
        if not candidate.take_answer(record):
            return False
        # shown as the text it is (a Markdown viewer renders none of its HTML, links or images);
        # the journal keeps it exactly
        self.store.write_text(f"candidates/{key}/answer.md", "\n".join(fenced(candidate.answer or "")) + "\n")
        return True

    def _program(self, candidate: Candidate) -> RewardProgram | None:
        """The checked program in the candidate's answer, or ``None`` with its failure set.

        The answer is read in a child process under limits (:mod:`~rewardlab.llm_reward.training.checking`):
        whatever it holds, this thread only waits, and gets a program or a failure."""
        checked = check_answer(candidate.answer or "", self.description)
        candidate.source = checked.source
        if checked.source is not None:
            self.store.write_text(f"candidates/{candidate.key}/program.py", checked.source)
        candidate.failure = checked.failure
        return checked.program

    def _prescreen(self, candidate: Candidate, program: RewardProgram) -> PrescreenScore:
        def score() -> dict[str, Any]:
            assert self._trajectories is not None
            return {"score": prescreen(program, self.config.env_id, self._trajectories,
                                       self.store.path("candidates", candidate.key, "prescreen"),
                                       self.config.prescreen_tau).to_dict()}

        record, _ = self.store.journaled("prescreen", candidate.key, score)
        assert record is not None
        candidate.prescreen = PrescreenScore.from_dict(record["score"])
        return candidate.prescreen

    def _task(
        self, key: str, source: str, seeds: Sequence[int], run_dir: Path, stop_rule: StopRule | None = None,
        program: RewardProgram | None = None,
    ) -> EvalTask:
        config = self.config
        return EvalTask(
            key=key, source=source, env_id=config.env_id, steps=config.steps, seeds=tuple(seeds),
            run_dir=os.fspath(run_dir), num_envs=config.num_envs, ppo_kwargs=self.config.training_kwargs(),
            num_checkpoints=config.num_checkpoints, eval_episodes=config.eval_episodes,
            timeout_s=config.timeout_s, description=config.description,
            stop_rule=stop_rule.to_dict() if stop_rule is not None else None,
            program=asdict(program) if program is not None else None,
        )  # fmt: skip

    def _evaluate(self, candidate: Candidate, program: RewardProgram) -> bool:
        """Train the candidate's program, as its answer was checked (or take its saved result);
        True if it was trained now."""

        def train() -> dict[str, Any]:
            assert candidate.source is not None
            # only the search's candidates may stop early: _train_seeds (finalists, final) never does
            task = self._task(candidate.key, candidate.source, self.config.seeds,
                              self.store.path("candidates", candidate.key, "train"), self._stop_rule, program)
            future = self.executor.submit(task, self._candidate_started)
            return {"result": future.result().to_dict()}

        record, trained = self.store.journaled("evaluation", candidate.key, train)
        assert record is not None
        result = candidate.result = journaled_run(record)
        if result.ok:
            candidate.signals = reward_signals(result.curve)
            board.log_candidate(result, candidate.prescreen.tau if candidate.prescreen else None)
        else:
            candidate.failure = result.failure
        return trained

    # --------------------------------------------------------- the rest
    def _load_trajectories(self) -> list[dict[str, Any]]:
        path = self.store.path("prescreen", "trajectories.json")
        if path.exists():
            stored = stored_trajectories(path.read_text(encoding="utf-8", errors="replace"))
            if stored is not None:
                return stored
            self.progress.note(f"prescreen: {path} holds no trajectories of the shape this search "
                               "stores; collecting them again")
        steps = self.config.steps if self.config.prescreen_steps is None else self.config.prescreen_steps
        self.progress.note(f"prescreen: collecting trajectories (random, and PPO trained {steps:,} steps "
                           "on the human reference reward) ...")
        trajectories = collect_trajectories(self.config.env_id, steps, seed=self.config.seed,
                                            num_envs=self.config.num_envs, ppo_kwargs=self.config.ppo_kwargs)
        self.store.write_text("prescreen/trajectories.json", json.dumps(
            {"env_id": self.config.env_id, "train_steps": steps, "trajectories": trajectories}))
        return trajectories

    def _log_iteration(self, iteration: int, history: list[Candidate]) -> None:
        current = [c for c in history if c.iteration == iteration]
        best, iteration_best = best_candidate(history), best_candidate(current)
        usage = sum((c.usage for c in history if c.usage is not None), Usage())
        costs = [c.cost_usd for c in history if c.usage is not None]
        board.log_iteration(
            self.store.path("tensorboard", "search"), iteration,
            best.fitness if best else None, iteration_best.fitness if iteration_best else None,
            sum(not c.ok for c in current), usage.total_tokens,
            None if None in costs else sum(cost for cost in costs if cost is not None),
        )  # fmt: skip
        if best is not None:
            self.progress.note(f"iteration {iteration + 1}/{self.config.iterations}: best so far {best.key} "
                               f"with fitness {best.fitness:.4g}; "
                               f"{sum(c.ok for c in current)}/{len(current)} trained")

    def _confirm(self, history: list[Candidate]) -> Candidate | None:
        """The best candidate, after training the finalists with their extra seeds: the best
        ``finalists`` by their training seed, and the evolve proposer's anchor (its first
        program, :meth:`EvolveProposer.anchor`) where it trained and is not among them; the
        pick is the one of highest :func:`confirmed_fitness` (a lower confidence bound over
        all its seeds)."""
        config = self.config
        ranked = sorted((c for c in history if c.ok), key=lambda c: (rank_key(c), -c.iteration, -c.sample),
                        reverse=True)
        finalists = ranked[:config.finalists]
        anchor = self._evolve.anchor() if isinstance(self._evolve, EvolveProposer) else None
        anchored = next((c for c in ranked if anchor is not None and c.answer == anchor), None)
        if finalists and anchored is not None and anchored not in finalists:
            # the proposer's first program (the human reward's structure) is always compared:
            # the pick must beat it over the same seeds, so the search returns at worst it
            finalists.append(anchored)
        if len(finalists) < 2 or config.finalist_seeds == 0:
            return best_candidate(history)
        seeds = [seed for seed in range(FINALIST_SEED_BASE, FINALIST_SEED_BASE + config.finalist_seeds
                                        + len(config.seeds)) if seed not in config.seeds][:config.finalist_seeds]
        pairs = [(candidate, seed) for candidate in finalists for seed in seeds]
        jobs = []
        for candidate, seed in pairs:
            assert candidate.source is not None
            candidate.confirmation = {}
            jobs.append(_SeedJob(f"{candidate.key}/seed_{seed}", candidate.source, seed,
                                 self.store.path("finalists", candidate.key, f"seed_{seed}"), {"candidate": candidate.key}))
        for index, result in self._train_seeds("finalist", "finalists", jobs):
            candidate, seed = pairs[index]
            candidate.confirmation[seed] = late_fitness(result)
        for candidate in finalists:
            candidate.confirmation = dict(sorted(candidate.confirmation.items()))
        best = max(finalists, key=lambda c: (confirmed_fitness(c), rank_key(c), -c.iteration, -c.sample))
        self.progress.note(f"finalists: {', '.join(f'{c.key} {confirmed_fitness(c):.4g}' for c in finalists)}; "
                           f"best {best.key}")
        return best

    def _queue_references(self) -> None:
        """Queue the references' final trainings, once: when the first candidate starts (else
        before the finalists). They do not depend on the search, so they train on the slots
        the candidates leave idle (stopped ones, an iteration's slowest one, the LLM's answer)
        and the final re-training waits only for what is left of them; queued any earlier, one
        of them takes the first free slot and the first candidate waits a whole training."""
        with self._references_lock:
            if self._references_queued:
                return
            self._references_queued = True
            self._references_ahead = self._queue_seeds("final", self._references, background=True)
        if self._in_background:
            self.progress.note(f"the references' final re-training ({len(self._in_background)} trainings) "
                               "runs on the slots the candidates leave idle")

    def _candidate_started(self) -> None:
        """A candidate's training started: the progress display counts it, and the references
        may queue behind it."""
        self.progress.started()
        self._queue_references()

    def _reference_jobs(self) -> list[_SeedJob]:
        """The sparse and human references' final trainings, one per final seed."""
        sources = {label: self.references[label].source for label in ("sparse", "human") if label in self.references}
        if sources.get("human") is not None and sources.get("human") == sources.get("sparse"):
            del sources["human"]  # one program (the MuJoCo tasks' env reward): train it once, report it once
        return [_SeedJob(f"{label}/seed_{seed}", source, seed, self.store.path("final", label, f"seed_{seed}"),
                         {"label": label, "candidate": None})
                for label, source in sources.items() for seed in self._final_seed_list()]

    def _final_seed_list(self) -> list[int]:
        return [FINAL_SEED_BASE + index for index in range(self.config.final_seeds)]

    def _final(self, best: Candidate | None) -> dict[str, FinalScore]:
        """Re-train the best program with the final seeds, next to the references' trainings."""
        if best is None or self.config.final_seeds == 0:
            return {}  # the references queued for nothing are cancelled as the run ends
        assert best.source is not None
        jobs = [_SeedJob(f"best:{best.key}/seed_{seed}", best.source, seed,
                         self.store.path("final", "best", f"seed_{seed}"), {"label": "best", "candidate": best.key})
                for seed in self._final_seed_list()]
        self.progress.start_iteration(0, len(jobs) + len(self._references), stage="final re-training")
        queued = self._queue_seeds("final", jobs) + self._references_ahead
        jobs += self._references
        scores = {label: FinalScore(label) for label in dict.fromkeys(job.fields["label"] for job in jobs)}
        for index, result in self._train_seeds("final", "final re-training", jobs, queued):
            self._score(scores[jobs[index].fields["label"]], jobs[index].seed, result)
        for score in scores.values():
            score.fitness = dict(sorted(score.fitness.items()))
        return scores

    def _queue_seeds(self, kind: str, jobs: list[_SeedJob],
                     background: bool = False) -> list[TrainingRun | Future[TrainingRun]]:
        """Each job's result from the journal's ``kind`` records where it ran before, else its
        training, queued (``background``: behind every other evaluation) and journaled when it ends."""
        queued: list[TrainingRun | Future[TrainingRun]] = []
        for job in jobs:
            record = self.store.get(kind, job.key)
            if record is not None:
                queued.append(journaled_run(record))
                continue

            def journal(result: TrainingRun, job: _SeedJob = job) -> None:
                self.store.append({"type": kind, "key": job.key, **job.fields, "seed": job.seed,
                                   "result": result.to_dict()})

            task = self._task(job.key, job.source, [job.seed], job.run_dir)
            future = self.executor.submit(task, None if background else self.progress.started,
                                          background=background, on_done=journal)
            if background:
                self._in_background.add(future)
            queued.append(future)
        return queued

    def _train_seeds(self, kind: str, stage: str, jobs: list[_SeedJob],
                     queued: list[TrainingRun | Future[TrainingRun]] | None = None) -> Iterator[tuple[int, TrainingRun]]:
        """Each job's one-seed training as ``(index, result)``, as they finish: from the journal
        where it ran before, else trained now (or ``queued`` before, :meth:`_queue_seeds`, after
        the stage's progress display was started)."""
        if queued is None:
            self.progress.start_iteration(0, len(jobs), stage=stage)
        pending: dict[Future[TrainingRun], int] = {}
        for index, item in enumerate(self._queue_seeds(kind, jobs) if queued is None else queued):
            if isinstance(item, Future):
                pending[item] = index
                continue
            self.progress.finished(jobs[index].key, trained=False)
            yield index, item
        for future in as_completed(pending):
            index = pending[future]
            job = jobs[index]
            counted = future not in self._in_background  # a background one never showed as running
            try:
                result = future.result()
            except CallbackError:
                raise  # its journal could not be written: the search cannot go on
            except Exception as error:  # noqa: BLE001 - a seed that could not run is a failed seed, not the end
                self.progress.finished(job.key, trained=counted)
                yield index, self._failed_run(job.source, error)  # not journalled: a resumed search tries again
                continue
            self.progress.finished(job.key, trained=counted)
            yield index, result

    def _failed_run(self, source: str, error: BaseException) -> TrainingRun:
        """The result of a training that raised instead of returning its result."""
        return TrainingRun(
            env_id=self.config.env_id, ok=False, fitness=None, success_rate=None, curve=[], seeds=[],
            failure=Failure(SEARCH_FAILURE, f"the training could not run ({_exception_text(error)})"),
            steps=self.config.steps or 0, wall_s=0.0, peak_rss_mb=None, peak_vm_mb=None, cpu_s=None, run_dir=None,
            source=source,
        )  # fmt: skip

    @staticmethod
    def _score(score: FinalScore, seed: int, result: TrainingRun) -> None:
        score.fitness[seed] = result.fitness if result.ok else None
        if not result.ok and result.failure is not None:
            score.failures.append(f"seed {seed}: {result.failure.kind}: {result.failure.reason}")

    def _result(
        self, history: list[Candidate], best: Candidate | None, final: dict[str, FinalScore], wall_s: float
    ) -> SearchResult:
        answers = [record for record in self.store.records("answer") if record.get("proposer") == "llm"]
        errors = list(self.store.records("llm_error"))
        costs = [journaled_cost(record.get("cost_usd")) for record in answers]
        normalized = normalized_score(final)
        return SearchResult(
            config=self.config,
            out=self.store.root,
            candidates=history,
            best=best,
            final=final,
            normalized_score=normalized,
            usage=sum((typed_usage(record.get("usage")) or Usage() for record in answers), Usage()),
            cost_usd=sum(cost for cost in costs if cost is not None),
            cost_unknown=any(cost is None for cost in costs),
            llm_calls=len(answers),
            llm_failures=len(errors),
            llm_retries=sum(journaled_count(record.get("retries")) for record in answers)
            + sum(journaled_count(record.get("tries"), 1) - 1 for record in errors),
            executor=self.executor.describe(),
            llm=self.client.describe() if self.client else None,
            wall_s=wall_s,
            feedback={record["iteration"]: record["text"]
                      for record in self.store.records("feedback")
                      if isinstance(record.get("iteration"), int)
                      and isinstance(record.get("text"), str | None)},
            final_runs=journal_runs(self.store.records("final"), "label"),
            finalist_runs=journal_runs(self.store.records("finalist"), "candidate"),
            fork_server_start_s=sum(server_startups()) if server_startups() else None,
        )


def _exception_text(error: BaseException) -> str:
    """``"TypeError: message"`` on one line and without control characters, whatever the
    exception's ``str()`` does."""
    try:
        text = f"{type(error).__name__}: {error}"
    except Exception:  # noqa: BLE001 - an exception whose str() fails
        text = type(error).__name__
    return " ".join(sanitize(text).split())[:500]


def search(
    config: SearchConfig,
    out: str | os.PathLike[str],
    *,
    client: ChatClient | None = None,
    executor: Executor | None = None,
    workers: int | None = None,
    feedback: FeedbackSource | None = None,
    resume: bool = False,
    progress: Progress | None = None,
    llm_concurrency: int = 4,
) -> SearchResult:
    """Run a reward-program search and write its run directory (report, best program, logs).

    :param config: what to search.
    :param out: the run directory (new, empty, or this run's with ``resume``).
    :param client: the LLM (``rewardlab.llm_reward.clients.make_client``) when the proposer is ``"llm"``.
    :param executor: where evaluations run (default: local processes, ``workers`` at a time;
        an executor given here is not shut down).
    :param workers: concurrent evaluations of the default executor (default: CPU count).
    :param feedback: Text2Reward's human feedback (file or terminal), if any.
    :param resume: continue the run in ``out``: saved answers and results are reused.
    :param progress: the progress display (default: none).
    :param llm_concurrency: LLM requests in flight at once; 1 asks in sample order.
    :raises ValueError: a bad config, env, output directory or client combination.
    :raises llm_reward.clients.EndpointError: the LLM endpoint cannot serve the search.
    """
    return _Search(config, out, client, executor, workers, feedback, resume, progress, llm_concurrency).run()
