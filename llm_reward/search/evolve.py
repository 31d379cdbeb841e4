"""``--proposer evolve``: structures from the description, weights tuned by Optuna (no LLM).

Like R* and URDP, a program is a *structure* (which terms it has) and *weights*. The terms
come from the env's description:

- ``task`` (the env's own reward) and ``potential`` (potential-based shaping with the env's
  built-in potential, when it has one, at the discount the candidate trains with): progress
  toward the goal that cannot change which policy is optimal;
- per state variable with one value per env: ``progress`` (``(v' - v) / s``) and
  ``linear`` (``v' / s``) in the variable's goal direction, ``away`` (``(|v'| - |v|) / s``,
  building energy, or damping it), ``square`` and ``gauss`` (staying near 0);
- ``guarded`` progress: progress times the margin of each condition the task keeps
  (a comparison in the success rule that episodes start in, such as
  ``distance_from_start <= 1`` for an ant turning on the spot), ``1 - share**2`` of the way
  from the start to the bound, so that moving on pays less the nearer a kept condition is
  to breaking, as a human writes it (``turning * (1 - distance**2)``);
- ``alive`` and ``terminal``; ``action_cost`` for continuous actions;
- ``closer`` on a goal-conditioned task: how much nearer the goal a step came, the distance
  between the coordinates the agent moves and the goal's (``pos_x`` and ``goal_x``: the same
  name after a different first word). Variables that never change within an episode under
  random actions (the goal's own coordinates) are what the agent cannot control: they get
  no terms of their own, only through ``closer``.

Signs are not drawn at random: they follow the task. A success rule or task text that
says ``position >= 0.5`` makes ``position``'s goal direction positive (comparisons in the
sentences that say how an episode fails are not goals, and ``|angle| < 0.2`` keeps a
variable near 0); "backwards", "left", "down" make it negative, and a variable's velocity
(``x_velocity`` of ``x``) follows it. What ``terminated`` means sets the rest:

- ``survive`` (the success rule is lasting until the time limit, or the text says
  balance/keep/stay): pay ``alive``, penalise ``terminal`` and ``away``;
- ``reach`` (the episode ends at the goal, and only there): the other way round;
- ``reach_alive`` (the episode ends at the goal or when the agent fails, as a hopper that
  must hop somewhere without falling): ``alive`` in every program, paying a tenth or so of
  what progress pays a step (tuned, never dropped: progress alone pays a hopper for diving
  backwards), and no ``terminal`` term, whose sign no single weight gets right for both
  ends. Where success ends the episode at a goal the observation gives (a goal-conditioned
  task, with ``closer`` pairs), a wage for staying alive is a trap: an agent that never
  reaches the goal collects it for the whole episode (the best program of a point mass's
  search was ``100 * env_reward + 0.1 * alive``, true return 0). So there the env's own
  reward is in every program, ``alive`` is optional, and a whole episode of it pays at most
  a tenth of the task term (none without one). A hopper's or an ant's task keeps its wage:
  falling is what ends those episodes early, and the wage is what keeps them up.

Categorical variables (a description's labels, MiniGrid's object types and door states) are
compared, never measured: their only term is ``event`` on a value the task names (``has_key``
for "pick up the key", ``front_state == open`` for "open the door", by :func:`named_labels`),
how much more the step made ``variable == value`` hold, so that no loop pays; a value the task
does not name (a locked door) is paid nothing, and no label gets ``progress``, a scale or a
``closer`` pair. On such a view the numbers (``goal_distance``, which a name with "distance"
directs down) get ``shaped`` terms, potential-based and 0 at an episode's end: the step onto
the goal hides it. The env's own reward is in every program (its weight tuned only where
failing also ends episodes). Where the env has a human reference with a potential, the
first program is the human reward's structure, the env's reward plus that potential-based
shaping at weight 1 (the human reward itself), and the study searches around it: the
shaping's weight, an ``alive`` wage or step cost, an action cost, a few state terms. Else
the first program is the env's reward alone. That first program is the search's anchor
(:meth:`EvolveProposer.anchor`): the finalists are always compared with it over the same
seeds, so a search returns nothing that did worse than it there.

A variable whose direction nothing names may take either sign. ``progress`` and ``away``
terms of a variable without a declared range are divided by its mean change in a step of
random actions (:func:`~rewardlab.llm_reward.search.evolve_random.random_motion`), so that a weight
of 1 means about as much on a MuJoCo robot's x as on MountainCar's position.

One Optuna study (TPE, multivariate, with constant liar for the batch in flight) searches
the structure (whether each task-level term is in, and which state term fills each of
:data:`VARIABLE_SLOTS` slots: small programs) and the weights (log-uniform) jointly;
each iteration the study is rebuilt from every candidate trained so far, so that the same
seed and history give the same proposals and a resumed search proposes what the
interrupted one would have. Candidates are ranked by task fitness, then success rate, then
the mean return of their training episodes (which tells apart candidates that all score
the floor, such as -200 on MountainCar before any evaluation episode reaches the flag).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from rewardlab.envs.descriptions import EnvDescription, success_if_terminated, success_if_truncated
from rewardlab.llm_reward.programs.program import RewardProgram
from rewardlab.llm_reward.search.evolve_random import (
    GUARDED,
    SHAPED,
    Guard,
    Term,
    borrow_references,
    categorical_variables,
    focus_variables,
    random_motion,
    render_program,
)
from rewardlab.llm_reward.search.records import Candidate, rank_key

__all__ = ["REACH", "REACH_ALIVE", "SURVIVE", "EvolveProposer", "goal_directions", "kept_conditions",
           "named_labels", "task_kind", "velocity_of"]

#: the most state variables that get term slots (the task's own first)
MAX_VARIABLES = 8
#: candidates before TPE models the history (the first round's structures are given)
STARTUP_TRIALS = 4
#: state-variable terms a program may have, besides the task, potential, alive, terminal
#: and action-cost terms (larger programs were rarely better and often did not train)
VARIABLE_SLOTS = 2
_NEGATIVE = re.compile(r"\b(backwards?|left|down|downwards|lower|decrease|negative|reverse)\b", re.I)
_POSITIVE = re.compile(r"\b(forwards?|right|up|upwards|higher|height|increase|positive|reach|top|flag|goal)\b", re.I)
_SURVIVE = re.compile(r"\b(balance|balanced|keep|stay|upright|as long as possible|survive|avoid falling)\b", re.I)
#: ``name >= 1``, ``|name| < 0.2`` (the bars: keep it near 0, no direction)
_COMPARISON = re.compile(r"(\|?)\b([A-Za-z_]\w*)\|?\s*(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?)")
#: a sentence or ``terminated`` meaning that speaks of success, or of failing
_SUCCEEDS = re.compile(r"\b(succe(ss|ssful|ssfully|eds?|eded)|reach(es|ed)? (the |its )?(goal|target)|at the goal)\b",
                       re.I)
_FAILS = re.compile(r"\b(without success|unhealthy|fails?|failed|failure|falls?|fell|fallen|crash\w*|left the|"
                    r"leaves|out of bounds)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+(?=[A-Z(])")
#: a distance, which a task that ends at a goal wants smaller (``goal_distance``)
_DISTANCE = re.compile(r"(^|_)(distance|dist)(_|$)")
#: words before a label that make it something to keep away from ("avoid the lava")
_NEGATED = re.compile(r"\b(avoid|avoiding|never|not|don't|without|away from)\s+(\w+\s+){0,2}$",
                      re.I)
#: words of an indicator's name that say nothing of what it indicates (``has_key``: key)
_INDICATOR_WORDS = frozenset({"has", "is", "any", "in", "front", "carrying", "visible", "seen"})
#: how a variable's velocity is named after it (``x`` -> ``x_velocity``)
_VELOCITY_NAMES = ("{}_velocity", "{}_vel", "{}_dot", "{}_rate")

#: the kinds of task, by what ends an episode (see the module)
SURVIVE, REACH, REACH_ALIVE = "survive", "reach", "reach_alive"


def task_kind(description: EnvDescription, task: str) -> str:
    """``"survive"`` (last until the time limit), ``"reach"`` (end the episode at a goal) or
    ``"reach_alive"`` (end it at a goal, where failing also ends it)."""
    if description.success is success_if_truncated:
        return SURVIVE
    if description.success is success_if_terminated:
        return REACH
    meaning = description.terminated_meaning
    if _SUCCEEDS.search(meaning):
        return REACH_ALIVE if _FAILS.search(meaning) else REACH
    text = f"{task} {description.summary} {description.success_metric}"
    return SURVIVE if _SURVIVE.search(text) else REACH


def goal_directions(
    description: EnvDescription, task: str, names: Sequence[str], start: Mapping[str, float] | None = None
) -> dict[str, int]:
    """Per variable: +1 (the task wants it larger), -1 (smaller) or 0 (nothing says).

    Comparisons in the success rule or the text (``position >= 0.5``) decide first, except
    where a sentence speaks of failing (``it ends without success when torso_z <= 0.7``); a
    comparison of a magnitude (``|torso_angle| < 0.2``), and one that the episodes' start
    already meets (``torso_z > 0.7`` for a hopper that starts at 1.25: a condition to keep,
    not a goal to move towards), leave the variable at 0. Then
    direction words ("backwards", "up") in the task, for the variables the task or the
    description's summary names, and last a named velocity follows its variable.

    :param start: per variable, its value where episodes start (:class:`Motion`'s ``start``).
    """
    directions = dict.fromkeys(names, 0)
    decided: set[str] = set()
    for bars, name, symbol, bound in _goal_comparisons(description, task):
        if name in directions and name not in decided:
            kept = start is not None and name in start and _holds(start[name], symbol, bound)
            directions[name] = 0 if bars or kept else 1 if symbol.startswith(">") else -1
            decided.add(name)
    if task_kind(description, task) == SURVIVE:
        return directions  # "swing up and balance": up is where it should stay, not a direction
    named = set(focus_variables(description)) | {n for n in names if re.search(rf"(?<!\w){n}(?!\w)", task)}
    words = -1 if _NEGATIVE.search(task) else 1 if _POSITIVE.search(task) else 0
    for name in names:
        if name not in decided and name in named:
            directions[name] = words
            decided.add(name)
    for name in names:
        if name not in decided and _DISTANCE.search(name):
            directions[name] = -1  # nearer, where the task is to get somewhere
            decided.add(name)
    for name in names:
        of = velocity_of(name, names)
        if of is not None and name not in decided:
            directions[name] = directions[of]
    return directions


def named_labels(description: EnvDescription, task: str) -> list[tuple[str, int, int]]:
    """The values of categorical variables the task names, as ``(variable, value, sign)``:
    an indicator (two categories) by a word of its name (``has_key``: "key"), another
    variable by a category's name (``front_object``'s "door"), indicators first. The sign is
    -1 where "avoid", "not" or "never" comes just before the word, else +1. The summary is
    read where the task names none.

    :param description: the env's description.
    :param task: the task text.
    """
    found: list[tuple[int, str, int, int]] = []
    for text in (task, description.summary):
        for name, categories in categorical_variables(description).items():
            if len(categories) == 2:
                words = [[word for word in name.split("_") if word not in _INDICATOR_WORDS]]
                values = [1]
            else:
                values = [value for value, label in enumerate(categories) if label]
                words = [[categories[value]] for value in values]
            for value, value_words in zip(values, words):
                match = next((m for word in value_words if word for m in
                              [re.search(rf"\b{re.escape(word)}s?\b", text, re.I)] if m), None)
                if match is not None:
                    sign = -1 if _NEGATED.search(text[: match.start()]) else 1
                    found.append((0 if len(categories) == 2 else 1, name, value, sign))
        if found:
            break
    return [(name, value, sign) for _, name, value, sign in sorted(found, key=lambda item: item[0])]


def kept_conditions(
    description: EnvDescription, task: str, names: Sequence[str], start: Mapping[str, float]
) -> list[Guard]:
    """The comparisons of the success rule or the text that episodes start in (as
    :func:`goal_directions` reads them, the first per variable): conditions the task keeps,
    such as ``distance_from_start <= 1`` for an ant that must turn on the spot. Magnitudes
    (``|angle| < 0.2``) are left out."""
    guards: list[Guard] = []
    seen: set[str] = set()
    for bars, name, symbol, bound in _goal_comparisons(description, task):
        if name in seen or name not in names or name not in start:
            continue
        seen.add(name)
        if not bars and start[name] != bound and _holds(start[name], symbol, bound):
            guards.append(Guard(name, _round(start[name]), bound))
    return guards


def _goal_comparisons(description: EnvDescription, task: str) -> list[tuple[str, str, str, float]]:
    """``(bars, name, symbol, bound)`` of every comparison in the task text, the summary and
    the success metric, in order, except those in a sentence's part about failing."""
    found = []
    for sentence in _SENTENCE.split(f"{task} {description.summary} {description.success_metric}"):
        failing = _FAILS.search(sentence)  # what follows it in the sentence is how episodes fail
        for bars, name, symbol, bound in _COMPARISON.findall(sentence[: failing.start() if failing else None]):
            found.append((bars, name, symbol, float(bound)))
    return found


def _holds(value: float, symbol: str, bound: float) -> bool:
    return {">=": value >= bound, "<=": value <= bound, ">": value > bound, "<": value < bound}[symbol]


def velocity_of(name: str, names: Sequence[str]) -> str | None:
    """The variable of ``names`` whose velocity ``name`` is (``x`` for ``x_velocity``), if any."""
    for pattern in _VELOCITY_NAMES:
        suffix = pattern.format("")
        if name.endswith(suffix) and name[: -len(suffix)] in names:
            return name[: -len(suffix)]
    return None


class EvolveProposer:
    """Proposes programs from the description's terms with Optuna-tuned structure and weights.

    :param description: the env's description.
    :param seed: seeds the study's sampler.
    :param references: the env's reference programs (``sparse``, ``human``), for the
        ``task`` and ``potential`` terms.
    :param task: the task text, for the signs.
    :param gamma: the discount the candidates train with (their learner's config's
        ``discount("potential")``), for the ``potential`` term; None: PPO's default.
    """

    def __init__(
        self,
        description: EnvDescription,
        seed: int,
        references: Mapping[str, RewardProgram] | None = None,
        task: str = "",
        gamma: float | None = None,
    ):
        self.description = description
        self.seed = seed
        self._task, self._potential = borrow_references(references, description, gamma)
        motion = random_motion(description)  # one env made, for the scalars, the start and the scales
        static, moves, self._episode_steps = _static_variables(description, motion.scalars)
        labels = categorical_variables(description)
        numbers = tuple(name for name in motion.scalars if name not in labels)
        #: (coordinate, goal coordinate) pairs of a goal-conditioned task, for ``closer``
        self.pairs = goal_pairs(numbers, static)
        #: the description has labels: a view (MiniGrid's), whose numbers get potential-based terms;
        #: what random actions do not change there is what they do not reach (a goal behind a door)
        self._view = bool(labels)
        # what the agent controls
        names = tuple(name for name in numbers if self._view or name not in static)
        #: the values of categorical variables the task names, with their signs, for ``event`` terms
        self.labels = [label for label in named_labels(description, task)
                       if label[0] in motion.scalars]
        self._gamma = gamma
        self.kind = task_kind(description, task)
        directions = goal_directions(description, task, names, motion.start)
        focus = [name for name in focus_variables(description) if name in names]
        directed = [name for name in names if directions[name]]  # a focus variable's velocity, too
        self.variables = tuple(dict.fromkeys([*focus, *directed, *names]))[:MAX_VARIABLES]
        self.directions = {name: directions[name] for name in self.variables}
        #: the conditions the task keeps, whose margins scale ``guarded`` progress
        self.guards = kept_conditions(description, task, names, motion.start)
        #: ``alive`` pays where an episode's end is bad news: survival, and failing on the way
        self._alive_sign = -1.0 if self.kind == REACH else 1.0
        #: the episode-end terms the study may choose, with their signs: ``terminal`` is
        #: success and failure at once where both end episodes, and no sign fits it there
        self._end_terms = (("alive", self._alive_sign), ("terminal", -self._alive_sign))[
            : 1 if self.kind == REACH_ALIVE or self._view else 2]
        #: the terms every program has, their weights tuned: where failing ends episodes
        #: early, progress without ``alive`` pays for falling the right way
        self._required = {"alive"} if self.kind == REACH_ALIVE else set()
        #: the env's own reward is in every program (the others add to it), so that where nothing
        #: beats it the search returns it: the first program is it alone
        if self._task is not None:
            self._required.add("task")
        self._ranges = {**_RANGES, **(_REACH_ALIVE_RANGES if self.kind == REACH_ALIVE else {}),
                        **(_VIEW_RANGES if self._view else {})}
        #: reaching the goal there forfeits the rest of the episode's ``alive`` pay, so the
        #: success the env pays is weighted (tuned from 100, as the human references weigh it)
        self._task_weight = 100.0 if self.kind == REACH_ALIVE else 1.0
        #: success ends the episode at a goal the observation gives (failing ends it too): the
        #: env's reward is in every program, and a whole episode's ``alive`` wage stays below a
        #: tenth of it
        self._goal_ends = self.kind == REACH_ALIVE and bool(self.pairs)
        if self._goal_ends:
            self._required = {"task"} if self._task is not None else set()
        self._steps = {name: scale for name, scale in motion.step.items() if name in self.variables}
        # closer is divided by the coordinates' own pace, as progress is where no range is declared
        self._steps |= {name: _round(moves[name]) for name, _ in self.pairs if moves.get(name)}
        self._continuous = description.action.dtype.startswith("float")

    # ---------------------------------------------------------------- the space
    def _shapes(self, name: str) -> list[str]:
        """The term kinds variable ``name`` may get, each with its sign."""
        direction = self.directions[name]
        signs = ("+", "-") if direction == 0 else ("+" if direction > 0 else "-",)
        if self._view:  # a view's number may not show the state at an episode's end
            return [f"{SHAPED}{s}" for s in signs]
        away = {REACH: ("+",), SURVIVE: ("-",)}.get(self.kind, ("+", "-"))
        guarded = [f"{GUARDED}{s}" for s in signs] if direction and self._guarded(name) else []
        return [*(f"progress{s}" for s in signs), *guarded, *(f"linear{s}" for s in signs),
                *(f"away{s}" for s in away), "square+", "gauss+"]

    def _guarded(self, name: str) -> bool:
        """Whether ``name``'s progress can be guarded: a kept condition is on another variable."""
        return any(guard.variable != name for guard in self.guards)

    def _slot_choices(self) -> list[str]:
        """What one state-term slot may hold: ``none`` or ``kind<sign>:variable``."""
        labels = [f"event{'+' if sign > 0 else '-'}:{name}={value}"
                  for name, value, sign in self.labels]
        numbers = [f"{shape}:{name}" for name in self.variables for shape in self._shapes(name)]
        return ["none", *labels, *numbers]

    def _suggest(self, trial: Any) -> list[Term]:
        """The terms one Optuna trial chooses (define-by-run: a weight only for a chosen term)."""
        terms: list[Term] = []
        if self._task is not None and ("task" in self._required or trial.suggest_categorical("task", [True, False])):
            weight = _round(self._suggest_log(trial, "w_task")) if self.kind == REACH_ALIVE else 1.0
            terms.append(Term("task", None, weight))
        if self._potential is not None and trial.suggest_categorical("potential", [True, False]):
            terms.append(Term("potential", None, _round(self._suggest_log(trial, "w_potential"))))
        if self.pairs and trial.suggest_categorical("closer", [True, False]):
            terms.append(Term("closer", None, _round(self._suggest_log(trial, "w_closer"))))
        for kind, sign in self._end_terms:
            if kind in self._required or trial.suggest_categorical(kind, [True, False]):
                terms.append(Term(kind, None, _round(sign * self._suggest_log(trial, f"w_{kind}"))))
        self._cap_alive(terms)
        if self._continuous and trial.suggest_categorical("action_cost", [True, False]):
            terms.append(Term("action_cost", None, _round(self._suggest_log(trial, "w_action_cost"))))
        choices = self._slot_choices()
        for slot in range(VARIABLE_SLOTS):  # a few state terms: small programs train and transfer best
            choice = trial.suggest_categorical(f"term_{slot}", choices)
            if choice == "none":
                continue
            shape, target = choice.split(":")
            name, _, value = target.partition("=")
            weight = self._suggest_log(trial, f"w_term_{slot}")
            temperature = 1.0
            if shape.startswith("gauss"):
                temperature = _round(self._suggest_log(trial, f"t_term_{slot}"))
            sign = 1.0 if shape.endswith("+") else -1.0
            term = Term(shape[:-1], name, _round(sign * weight), temperature,
                        int(value) if value else None)
            if all(other.name != term.name for other in terms):
                terms.append(term)
        if not terms:  # an empty program pays nothing: fall back to the env's own reward, or survival
            terms.append(Term("task", None, self._task_weight) if self._task is not None
                         else Term("alive", None, self._alive_sign))
        return terms

    def _cap_alive(self, terms: list[Term]) -> None:
        """Where success ends the episode, keep a whole episode of positive ``alive`` pay below
        a tenth of the task term's (the trap of the module's docstring)."""
        if not self._goal_ends:
            return
        task = next((term for term in terms if term.kind == "task"), None)
        # 0.099: the wage rounded to 4 digits stays under a tenth
        cap = _round(0.099 * abs(task.weight) / self._episode_steps) if task is not None else 0.0
        for index, term in enumerate(terms):
            if term.kind == "alive" and term.weight > cap:
                terms[index] = Term("alive", None, cap)
        terms[:] = [term for term in terms if term.kind != "alive" or term.weight != 0.0]

    def _params(self, terms: Sequence[Term]) -> dict[str, Any]:
        """The trial parameters that :meth:`_suggest` maps to ``terms`` (for the study's history)."""
        kinds = {term.kind: term for term in terms if term.variable is None}
        params: dict[str, Any] = {}
        if self._task is not None:
            if "task" not in self._required:
                params["task"] = "task" in kinds
            if "task" in kinds and self.kind == REACH_ALIVE:
                params["w_task"] = kinds["task"].weight
        if self._potential is not None:
            params["potential"] = "potential" in kinds
            if "potential" in kinds:
                params["w_potential"] = abs(kinds["potential"].weight)
        if self.pairs:
            params["closer"] = "closer" in kinds
            if "closer" in kinds:
                params["w_closer"] = abs(kinds["closer"].weight)
        for kind in (*(kind for kind, _ in self._end_terms), *(("action_cost",) if self._continuous else ())):
            if kind not in self._required:
                params[kind] = kind in kinds
            if kind in kinds:  # a capped alive wage may sit below its range: the study sees the nearest
                low, high = self._log_range(f"w_{kind}")
                params[f"w_{kind}"] = min(max(abs(kinds[kind].weight), low), high)
        state_terms = [term for term in terms if term.variable is not None][:VARIABLE_SLOTS]
        for slot in range(VARIABLE_SLOTS):
            if slot >= len(state_terms):
                params[f"term_{slot}"] = "none"
                continue
            term = state_terms[slot]
            value = "" if term.category is None else f"={term.category}"
            sign = "+" if term.weight >= 0 else "-"
            params[f"term_{slot}"] = f"{term.kind}{sign}:{term.variable}{value}"
            params[f"w_term_{slot}"] = abs(term.weight)
            if term.kind == "gauss":
                params[f"t_term_{slot}"] = term.temperature
        return params

    def _distributions(self, params: Mapping[str, Any]) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution, FloatDistribution

        distributions: dict[str, Any] = {}
        for key in params:
            if key in ("task", "potential", "closer", "alive", "terminal", "action_cost"):
                distributions[key] = CategoricalDistribution([True, False])
            elif key.startswith("term_"):
                distributions[key] = CategoricalDistribution(self._slot_choices())
            else:
                distributions[key] = FloatDistribution(*self._log_range(key), log=True)
        return distributions

    def _log_range(self, name: str) -> tuple[float, float]:
        """The log-uniform range Optuna tunes parameter ``name`` in."""
        return _TEMPERATURE if name.startswith("t_") else self._ranges.get(name, _STATE_WEIGHT)

    def _suggest_log(self, trial: Any, name: str) -> float:
        return trial.suggest_float(name, *self._log_range(name), log=True)

    def canonical(self) -> list[list[Term]]:
        """The first round's structures, in order: the env's own reward with the built-in
        potential as shaping (the human reference's structure, where it has a potential); the
        env's own reward alone; with progress along the task's directions (goal tasks; where
        failing also ends episodes, along each direction alone first, as which of them
        carries the task is unknown) or staying near 0 (survival tasks); building (or
        damping) energy; ``alive`` and ``terminal``. Each has the terms every program has,
        with a small ``alive``."""
        base = [Term("task", None, self._task_weight)] if self._task is not None else []
        if self._view:
            return self._view_structures(base)
        structures = [base] if base else []
        if self._potential is not None:  # the human reward's structure, first (:meth:`anchor`)
            structures.insert(0, [*base, Term("potential", None, 1.0)])
        alive = Term("alive", None, self._alive_sign * 0.1)
        if self.pairs:  # nearer the goal: what a reader of a goal-conditioned task tries first
            structures.append([*base, Term("closer", None, 1.0)])
        directed = [name for name in self.variables if self.directions[name]]
        focus = [name for name in focus_variables(self.description) if name in self.variables] or list(
            self.variables[:2])
        if self.kind != SURVIVE and directed:
            # progress along a position, the velocity itself for a velocity (x_velocity of x)
            progress = [Term("linear" if velocity_of(name, self.variables) else "progress", name,
                             1.0 * self.directions[name]) for name in directed[:VARIABLE_SLOTS]]
            alone = [[term] for term in progress] if self.kind == REACH_ALIVE and len(progress) > 1 else []
            structures.extend([*base, *terms] for terms in [*alone, progress])
            # the same progress, paid less the nearer the kept conditions are to breaking
            guarded = [Term(GUARDED, t.variable, t.weight) if t.kind == "progress" and self._guarded(t.variable or "")
                       else t for t in progress]
            if guarded != progress:
                structures.append([*base, *guarded])
        elif focus:
            structures.append([*base, *(Term("square", name, 0.5) for name in focus[:2])])
        if self.variables and self.kind != REACH_ALIVE:  # whether to build or damp energy is unknown there
            sign = 1.0 if self.kind == REACH else -1.0
            structures.append([*base, *(Term("away", name, sign * 1.0) for name in self.variables[:2])])
        structures.append([*base, alive, *(Term(kind, None, sign * 1.0) for kind, sign in self._end_terms[1:])])
        if self._continuous:
            structures.append([*base, Term("action_cost", None, 0.01)])
        required = [alive] if "alive" in self._required else []
        completed = [[*terms, *(t for t in required if t not in terms)] for terms in structures]
        for terms in completed:
            self._cap_alive(terms)
        return list({self.render(terms): terms for terms in completed if terms}.values())

    def anchor(self) -> str | None:
        """The program a search with this proposer returns at worst: the first round's first,
        the human reference's structure (the env's own reward plus its potential-based
        shaping, at weight 1: the human reward itself) where the env has one, else the env's
        own reward (with the terms every program has). The search trains it again with the
        finalists' seeds even where its training seed did not rank it among them, so that the
        pick is one that beat it over the same seeds. ``None``: nothing to start from (no env
        reward to borrow).
        """
        if self._task is None:
            return None
        structures = self.canonical()
        return self.render(structures[0]) if structures else None

    def _view_structures(self, base: list[Term]) -> list[list[Term]]:
        """The first round on a view's labels: the env's own reward; with the events the task
        names (the indicators first: picking up the key, the door opening); with potential-based
        shaping by the numbers the task directs (nearer the goal); with both; a step cost."""
        events = [Term("event", name, float(sign), category=value)
                  for name, value, sign in self.labels]
        shaped = [Term(SHAPED, name, float(self.directions[name])) for name in self.variables
                  if self.directions[name]]
        step_cost = Term("alive", None, self._alive_sign * 0.1)
        structures = [base, [*base, *events[:VARIABLE_SLOTS]], [*base, *shaped[:VARIABLE_SLOTS]],
                      [*base, *events[:1], *shaped[:1]], [*base, step_cost]]
        return list({self.render(terms): terms for terms in structures if terms}.values())

    # ---------------------------------------------------------------- proposing
    def render(self, terms: Sequence[Term]) -> str:
        """The source of a program made of ``terms``."""
        return render_program(terms, self.description, self._task, self._potential, self._steps, self.guards,
                              self.pairs, self._gamma)

    def propose(
        self, iteration: int, count: int, history: Sequence[Candidate]
    ) -> list[tuple[list[dict[str, object]], str]]:
        """``count`` new programs for ``iteration``, as ``(genome, source)`` pairs.

        :param iteration: 0-based iteration.
        :param count: how many.
        :param history: every candidate of the earlier iterations, with its results.
        """
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(
                seed=self.seed * 1_000 + iteration, n_startup_trials=STARTUP_TRIALS, multivariate=True,
                group=True, constant_liar=True,
            )
        study = optuna.create_study(direction="maximize", sampler=sampler)
        trained = [c for c in history if c.genome is not None]
        # the study sees ranks: fitness, success, training return; a candidate stopped early
        # ranks below every trained one, by how far it got and its fitness there (as a
        # failure it would teach the study nothing about where not to look)
        ranked = sorted(trained, key=_stopped_or_rank)
        rank = {c.key: index for index, c in enumerate(ranked)}
        for candidate in trained:
            terms = [Term(**term) for term in candidate.genome or []]
            params = self._params(terms)
            ok = candidate.result is not None and (candidate.result.fitness is not None
                                                   or candidate.result.stopped is not None)
            study.add_trial(optuna.trial.create_trial(
                params=params, distributions=self._distributions(params),
                value=float(rank[candidate.key]) if ok else None,
                state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL,
            ))
        seen = {c.source for c in history if c.source}
        if not trained:  # the first round: the structures a reader of the description would try
            for terms in self.canonical()[:count]:
                study.enqueue_trial(self._params(terms))
        proposals: list[tuple[list[dict[str, object]], str]] = []
        for _ in range(count):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                for _ in range(20):  # a proposal seen before teaches the study nothing new
                    trial = study.ask()
                    terms = self._suggest(trial)
                    if self.render(terms) not in seen:
                        break
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            source = self.render(terms)
            seen.add(source)
            proposals.append(([term.record() for term in terms], source))
        return proposals


def _stopped_or_rank(candidate: Candidate) -> tuple[int, tuple[float, ...]]:
    """A candidate's place among those the study learns from: trained ones by :func:`rank_key`,
    above those stopped early (by the rung they reached, then their fitness there)."""
    stop = candidate.result.stopped if candidate.result is not None else None
    if stop is not None:
        return 0, (float(stop.rung), stop.fitness)
    return 1, rank_key(candidate)


#: the log-uniform ranges Optuna tunes, by parameter name: the task-level weights (the task's
#: own only where failing also ends episodes, else it is 1); every
#: state term's weight (``w_term_*``) and gauss temperature (``t_term_*``) share one each
_RANGES = {"w_task": (1.0, 1000.0), "w_potential": (0.1, 10.0), "w_closer": (0.1, 10.0), "w_alive": (0.01, 2.0), "w_terminal": (0.1, 20.0), "w_action_cost": (1e-4, 0.1)}
#: where failing also ends episodes, ``alive`` is a small wage beside progress (whose weight
#: of 1 pays about 1 a step at a random policy's pace, a few once it moves): from 0.03 it
#: counts, up to 0.3 it stays well below progress (Hopper-Backward's human reference with
#: Hopper's own healthy reward, 1 a step beside the backward speed in m/s, stood still)
_REACH_ALIVE_RANGES = {"w_alive": (0.03, 0.3)}
#: a view's task pays 1 at most for an episode that may last hundreds of steps (MiniGrid's):
#: a step's cost stays a few times that over a whole episode, and no end term is proposed
#: (the env's reward pays success, and an episode may end in lava as well)
_VIEW_RANGES = {"w_alive": (0.001, 0.02)}
_STATE_WEIGHT = (0.01, 10.0)
_TEMPERATURE = (0.1, 3.0)


def _round(value: float) -> float:
    return float(f"{value:.4g}")


#: first words that name a velocity, not a coordinate (``vel_x`` is no position to bring to ``goal_x``)
_VELOCITY_WORDS = ("vel", "velocity", "speed", "v", "dot")


def goal_pairs(names: Sequence[str], static: set[str]) -> list[tuple[str, str]]:
    """``(coordinate, goal coordinate)`` pairs: a variable that never changes within an episode
    and one that does, named alike but for their first word (``goal_x`` and ``pos_x``,
    ``target_0`` and ``hand_0``), velocities left out.

    :param names: the scalar variables.
    :param static: those that never changed within an episode under random actions.
    """
    def split(name: str) -> tuple[str, str]:
        first, _, rest = name.partition("_")
        return first, rest

    pairs = []
    for goal in names:
        if goal not in static or not split(goal)[1]:
            continue
        for name in names:
            first, rest = split(name)
            if name not in static and rest == split(goal)[1] and first != split(goal)[0] and \
                    first.lower() not in _VELOCITY_WORDS:
                pairs.append((name, goal))
                break
    return pairs


def _static_variables(
    description: EnvDescription, names: Sequence[str], steps: int = 50
) -> tuple[set[str], dict[str, float], int]:
    """The variables that never change within an episode under seeded random actions (a goal's
    coordinates: what the agent cannot control), every variable's mean absolute change in a
    step, and the env's episode length (its time limit, else ``steps``); none where the env
    cannot be made."""
    from rewardlab import envs

    try:
        env = envs.make(description.env_id, num_envs=8, seed=0)
    except ValueError:
        return set(), {}, steps
    try:
        env.action_space.seed(0)
        obs, _ = env.reset()
        totals = dict.fromkeys(names, 0.0)
        for _ in range(steps):
            obs_next, _, _, _, info = env.step(env.action_space.sample())
            # final_obs is the step's own next state, the true last one where an episode ended
            before, after = description.state_tensors(obs, names), description.state_tensors(info["final_obs"], names)
            for name in names:
                totals[name] += float((after[name].float() - before[name].float()).abs().mean())
            obs = obs_next
        moves = {name: total / steps for name, total in totals.items()}
        episode_steps = int(getattr(env, "max_episode_steps", None) or steps)
        return {name for name, move in moves.items() if move == 0.0}, moves, episode_steps
    finally:
        env.close()

