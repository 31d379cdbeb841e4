"""What a search is: :class:`SearchConfig`, its choices and the keys a resumed search must share."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from rewardlab.common.compile_budget import compiles
from rewardlab.common.seeds import check_seeds
from rewardlab.llm_reward.search.budgets import default_budget

__all__ = ["IDENTITY", "SearchConfig"]

MODES = ("eureka", "text2reward")
PROPOSERS = ("llm", "evolve", "evolve-random")
OFFLINE = ("evolve", "evolve-random")
PRESCREEN_MODES = ("off", "reject", "audit")
ENV_SOURCE_MODES = ("auto", "always", "never")


@dataclass
class SearchConfig:
    """What a search is; a resumed search must have the same (see :data:`IDENTITY`).

    :param env_id: a batched env with a registered description.
    :param task: the task, in words.
    :param mode: ``"eureka"`` (reward reflection) or ``"text2reward"`` (few-shot examples
        and human feedback).
    :param proposer: ``"llm"``, ``"evolve"`` (no LLM: structures from the description,
        weights tuned by Optuna, :mod:`~rewardlab.llm_reward.search.evolve`) or
        ``"evolve-random"`` (no LLM: random terms and signs, mutated;
        :mod:`~rewardlab.llm_reward.search.evolve_random`, the earlier baseline).
    :param llm: ``"PROVIDER:MODEL"``, for the record (the client is given to :func:`search`).
    :param iterations: rounds of proposals.
    :param samples: programs per round.
    :param steps: training env steps per seed of every candidate; ``None`` (like ``num_envs``
        and ``ppo_kwargs``): the env's default budget, where the human reference reward
        solves the task (:mod:`rewardlab.llm_reward.search.budgets`).
    :param seeds: the candidates' training seeds.
    :param final_seeds: seeds of the final re-training (``100, 101, ...``); 0 skips it.
    :param finalists: after the last iteration, the best ``finalists`` candidates are
        trained again with ``finalist_seeds`` more seeds (``50, 51, ...``, none of ``seeds``) and the best is the
        one with the highest fitness over all its seeds: one lucky training seed does not
        pick the program the final re-training reports. 0 or 1: the best by its own seed(s).
    :param finalist_seeds: extra seeds per finalist.
    :param shots: Text2Reward's few-shot examples in the first prompt (0: zero-shot).
    :param prescreen: ``"off"``, ``"reject"`` (CLI ``--prescreen``: programs that rank
        stored trajectories badly are not trained) or ``"audit"`` (score all, train all).
    :param prescreen_tau: the lowest Kendall tau that passes.
    :param prescreen_steps: PPO steps on the human reference for the stored trajectories
        (``None``: ``steps``).
    :param seed: seeds the evolve proposer and the trajectory collection.
    :param num_envs: batched envs per training run.
    :param ppo_kwargs: PPO's hyperparameters for every training run.
    :param num_checkpoints: fitness measurements per training run (Eureka's ~10 points).
    :param eval_episodes: evaluation episodes per measurement.
    :param timeout_s: wall-clock limit of one evaluation.
    :param description: the checked data of a description file for the env (CLI
        ``--describe FILE``, :func:`rewardlab.envs.description_files.load_description`);
        ``None``: the env's registered description, or one derived from its spaces.
    :param env_source: show the env's source code in the prompt (Eureka): ``"auto"`` (for
        envs without a built-in description), ``"always"`` or ``"never"``.
    :param compile: train every candidate with PPO's compiled graphs (``PPO(compile=True)``,
        unless ``ppo_kwargs`` says otherwise), loaded once by the sandbox's fork server; the
        first search of a budget on a machine compiles them into the cache (tens of
        seconds, minutes on a busy machine, before the first candidate trains), later ones
        load them. The same training as eagerly up to float rounding, which a long run
        amplifies: a seed's numbers differ between the two. ``None`` (the default): compile
        where the search's trainings add up to at least
        :data:`~rewardlab.common.compile_budget.AUTO_COMPILE_STEPS` steps
        (:meth:`training_steps`), the rule of ``rewardlab train`` applied to what one compile
        serves: a default classic search (about 40 trainings of 60k-150k steps) compiles, a
        short trial search starts at once, eagerly.
    :param early_stopping: stop a candidate whose fitness at a third of its budget is in the
        bottom half of the earlier iterations' candidates that got there and no higher than at a
        ninth (behind on level and not rising, :mod:`~rewardlab.llm_reward.training.stopping`);
        the finalists' seeds and the final re-training always train to the end.
    """

    env_id: str
    task: str
    mode: str = "eureka"
    proposer: str = "llm"
    llm: str | None = None
    iterations: int = 5
    samples: int = 4
    steps: int | None = None
    seeds: tuple[int, ...] = (0,)
    final_seeds: int = 5
    finalists: int = 3
    finalist_seeds: int = 2
    shots: int = 0
    prescreen: str = "off"
    prescreen_tau: float = 0.2
    prescreen_steps: int | None = None
    seed: int = 0
    num_envs: int | None = None
    ppo_kwargs: dict[str, Any] | None = None
    num_checkpoints: int = 10
    eval_episodes: int = 10
    timeout_s: float = 1800.0
    description: dict[str, Any] | None = None
    env_source: str = "auto"
    compile: bool | None = None
    early_stopping: bool = True
    #: where the budget came from when ``steps``, ``num_envs`` or ``ppo_kwargs`` were left to the
    #: env's default (:func:`~rewardlab.llm_reward.search.budgets.default_budget`), for the report
    budget_note: str = ""

    def __post_init__(self) -> None:
        if self.steps is None or self.num_envs is None or self.ppo_kwargs is None:
            budget = default_budget(self.env_id)
            given = [name for name, value in (("steps", self.steps), ("envs", self.num_envs),
                                              ("PPO settings", self.ppo_kwargs)) if value is not None]
            self.steps = budget.steps if self.steps is None else self.steps
            self.num_envs = budget.num_envs if self.num_envs is None else self.num_envs
            self.ppo_kwargs = dict(budget.ppo_kwargs) if self.ppo_kwargs is None else self.ppo_kwargs
            note = budget.note
            if given:  # the note describes the default; say what this search changed
                note += (f" (this search set its {' and '.join(given)}: {self.steps:,} steps over "
                         f"{self.num_envs} envs)")
            self.budget_note = self.budget_note or note
        if self.compile is None and isinstance(self.steps, int):
            self.compile = compiles(self.training_steps())

    def check(self) -> None:
        """Raise ``ValueError`` naming any bad value and what is allowed."""
        for name, choices in (("mode", MODES), ("proposer", PROPOSERS), ("prescreen", PRESCREEN_MODES)):
            if getattr(self, name) not in choices:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; choose from {', '.join(choices)}")
        if not self.task.strip():
            raise ValueError("the task is empty: pass --task \"what the agent should do\"")
        for name in ("iterations", "samples", "steps", "num_envs", "num_checkpoints", "eval_episodes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
        for name in ("final_seeds", "shots", "finalists", "finalist_seeds"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {name}={getattr(self, name)!r}")
        if not self.seeds or not all(isinstance(seed, int) for seed in self.seeds):
            raise ValueError(f"seeds must be a non-empty list of integers, got {self.seeds!r}")
        check_seeds(self.seeds, "--seeds")
        check_seeds([self.seed], "--seed")
        if self.shots and self.mode != "text2reward":
            raise ValueError("--shots are Text2Reward's few-shot examples; pass --mode text2reward")
        if self.proposer == "llm" and not self.llm:
            raise ValueError("the llm proposer needs a model: pass --llm PROVIDER:MODEL (or --proposer evolve)")
        if self.proposer in OFFLINE and self.llm:
            raise ValueError(f"--proposer {self.proposer} needs no LLM; drop --llm, or drop --proposer")
        if self.proposer in OFFLINE and self.mode != "eureka":
            raise ValueError("--mode text2reward writes prompts for an LLM; the evolve proposer has none")
        if self.prescreen_steps is not None and (not isinstance(self.prescreen_steps, int) or self.prescreen_steps < 1):
            raise ValueError(f"prescreen_steps must be a positive integer or None (--steps), got "
                             f"prescreen_steps={self.prescreen_steps!r}")
        if not -1.0 <= self.prescreen_tau <= 1.0:
            raise ValueError(f"prescreen_tau is a Kendall tau in [-1, 1], got {self.prescreen_tau!r}")
        if self.env_source not in ENV_SOURCE_MODES:
            raise ValueError(f"unknown env_source {self.env_source!r}; choose from {', '.join(ENV_SOURCE_MODES)}")
        for name in ("compile", "early_stopping"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {name}={getattr(self, name)!r}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s!r}")
        try:
            json.dumps(self.ppo_kwargs)
        except (TypeError, ValueError) as error:
            raise ValueError(f"ppo_kwargs must be JSON data: {error}") from error

    def training_steps(self) -> int:
        """The env steps of every training the search runs at most: its candidates' seeds,
        the finalists' extra seeds and the final re-training of the best and the two
        references. PPO's graphs are compiled once for all of them, so this is what the
        compile pays back against (:func:`~rewardlab.common.compile_budget.compiles`)."""
        trainings = (self.iterations * self.samples * len(self.seeds) + self.finalists * self.finalist_seeds
                     + 3 * self.final_seeds)
        return trainings * (self.steps or 0)

    def training_kwargs(self) -> dict[str, Any]:
        """PPO's settings for every training run: the budget's, with ``compile`` unless they set it."""
        return {"compile": self.compile, **(self.ppo_kwargs or {})}

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON data."""
        data = asdict(self)
        data["seeds"] = list(self.seeds)
        return data


# Config keys a resumed run must share with the saved one: everything but the timeout.
IDENTITY = tuple(f.name for f in fields(SearchConfig) if f.name not in ("timeout_s", "budget_note"))
