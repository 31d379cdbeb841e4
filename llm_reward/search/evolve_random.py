"""``--proposer evolve-random``: a reward-program search that needs no LLM (random terms and signs, mutated; the baseline of ``--proposer evolve``).

Programs are built from the env description's terms, each a weighted component:

- per state variable ``v`` (scaled by its range ``s``): ``-(v'/s)**2`` (stay near 0),
  ``v'/s`` (push it one way), ``exp(-(v'/s)**2 / T)`` (closeness with a temperature),
  ``(v' - v)/s`` (progress), ``(|v'| - |v|)/s`` (move away from 0), ``|v'/s|`` (speed);
- per categorical variable (a label, :attr:`StateVariable.categories`) only ``event``:
  ``(v' == k) - (v == k)`` for one of its values ``k``, never a scale or a difference of labels;
- ``alive`` (``1 - terminated``), ``terminal`` (``terminated``), ``action_cost``
  (``-action**2``, continuous actions, summed over the action's dimensions);
- ``task``: the env's own reward (the ``sparse`` reference program), and ``potential``:
  potential-based shaping ``GAMMA * phi(s') * (1 - terminated) - phi(s)`` with the formula of
  the env's built-in potential (the ``human`` reference program's ``potential``) and
  ``GAMMA`` the discount the candidate trains with (the proposer's ``gamma``): at any other
  the term would not telescope, and could change what the learner finds optimal.

Descriptions with many state variables (:data:`FOCUS_MIN_VARIABLES`, the MuJoCo tasks)
would dilute a uniform choice of variable, so half of their state terms take a variable
that the task's summary or success metric names (``x`` for running backwards, ``turned``
for turning in place), as a reader of the description would.

The first iteration samples random programs (its first sample is the env's own reward
alone, when there is one: the search can always fall back to it). Later iterations
select parents by task fitness (tournaments among the best half of everything trained so
far), recombine their terms and mutate weights, temperatures, variables and terms. The
reflection data steer the mutations: a component that stayed constant is dropped or
scaled up, a dominating one scaled down, and a parent flagged for reward hacking loses a
term. Every program is rendered as source text that passes the static checks and is
evaluated like an LLM's. Given the same seed and history, proposals are the same, so a
resumed search proposes what the interrupted one would have.
"""

from __future__ import annotations

import ast
import math
import random
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from rewardlab.envs.descriptions import ACTION, NEXT_PREFIX, TERMINATED, EnvDescription
from rewardlab.llm_reward.programs.program import RewardProgram
from rewardlab.llm_reward.programs.references import default_gamma
from rewardlab.llm_reward.search.records import Candidate
from rewardlab.llm_reward.search.reflection import component_notes

__all__ = ["GUARDED", "SHAPED", "EvolveRandomProposer", "Guard", "Term", "categorical_variables",
           "focus_variables", "Motion", "random_motion", "render_program"]

STATE_KINDS = ("square", "linear", "gauss", "progress", "away", "speed")
#: the terms of a categorical variable (:attr:`StateVariable.categories`): ``event`` is how much
#: more the step made ``variable == category`` hold (1 when it began to hold, -1 when it stopped,
#: so that no cycle pays), the one thing a label is used for: never scaled or subtracted
CATEGORY_KINDS = ("event",)
#: potential-based shaping by one variable, ``GAMMA * v' * (1 - terminated) - v`` over its
#: scale: 0 at an episode's end, where a view's variables need not show the state (MiniGrid's
#: goal is hidden under the agent that reached it)
SHAPED = "shaped"
GLOBAL_KINDS = ("alive", "terminal", "action_cost", "task", "potential", "closer")
#: progress times the margins of the task's kept conditions (:class:`Guard`; ``--proposer
#: evolve`` only, which reads the conditions from the description)
GUARDED = "guarded"
MAX_TERMS = 6
MAX_TRIES = 50
POOL_SIZE = 8
FOCUS_MIN_VARIABLES = 10


@dataclass(frozen=True)
class Term:
    """One weighted component of an evolved program.

    :param kind: one of :data:`STATE_KINDS` (with a variable) or :data:`GLOBAL_KINDS`.
    :param variable: the state variable of a state term, else ``None``.
    :param weight: the component's weight.
    :param temperature: the temperature of ``gauss`` terms.
    :param category: the value of a categorical variable an ``event`` term compares with.
    """

    kind: str
    variable: str | None
    weight: float
    temperature: float = 1.0
    category: int | None = None

    def record(self) -> dict[str, object]:
        """The term as a candidate's genome holds it (no ``category`` where it has none, as
        genomes were written before terms had one)."""
        fields = asdict(self)
        if self.category is None:
            del fields["category"]
        return fields

    @property
    def name(self) -> str:
        """The component's name: ``kind``, ``kind_variable`` or ``kind_variable_is_category``."""
        if self.variable is None:
            return self.kind
        category = "" if self.category is None else f"_is_{self.category}"
        return f"{self.kind}_{self.variable}{category}"


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def _scale(description: EnvDescription, name: str) -> float:
    for variable in description.state:
        if variable.name == name:
            bounds = [abs(b) for b in (variable.low, variable.high) if b is not None and math.isfinite(b)]
            return _round(max(bounds)) if bounds and max(bounds) > 0 else 1.0
    raise ValueError(f"{name!r} is not a state variable of {description.env_id}")


@dataclass(frozen=True)
class _Borrowed:
    """A function taken from a reference program: its source and parameters."""

    source: str
    parameters: tuple[str, ...]


def _borrow_task(program: RewardProgram | None) -> _Borrowed | None:
    """The sparse reference's reward function, renamed ``task_reward``."""
    if program is None:
        return None
    tree = ast.parse(program.source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == program.function_name:
            node.name = "task_reward"
            return _Borrowed(ast.unparse(node), program.parameters)
    return None


def _borrow_potential(program: RewardProgram | None, description: EnvDescription,
                      gamma: float) -> _Borrowed | None:
    """The human reference's constants and ``potential`` function, if it has one over state
    variables, with ``GAMMA = gamma`` (the reference's own ``GAMMA``, if any, left out).

    :param gamma: the discount the candidate trains with.
    """
    if program is None:
        return None
    tree = ast.parse(program.source)
    own_gamma = ast.parse(f"GAMMA = {float(gamma)!r}").body[0]
    constants = [own_gamma, *(node for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
                              and ast.unparse(node).split("=")[0].split(":")[0].strip() != "GAMMA")]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "potential":
            parameters = tuple(argument.arg for argument in node.args.args)
            if parameters and all(name in description.state_names for name in parameters):
                node.body = [
                    statement for index, statement in enumerate(node.body)
                    if not (index == 0 and isinstance(statement, ast.Expr))  # drop its docstring
                ] or [ast.Pass()]
                source = "\n".join(ast.unparse(statement) for statement in [*constants, node])
                return _Borrowed(source, parameters)
    return None


def borrow_references(references: Mapping[str, RewardProgram] | None, description: EnvDescription,
                      gamma: float | None) -> tuple[_Borrowed | None, _Borrowed | None]:
    """What both offline proposers take from the references: the sparse one's reward as
    ``task_reward`` and the human one's potential, its ``GAMMA`` the candidate's.

    :param gamma: the discount the candidates train with; None: :func:`default_gamma`.
    :return: ``(task, potential)``, each None where the reference or its function is missing.
    """
    references = references or {}
    return (_borrow_task(references.get("sparse")),
            _borrow_potential(references.get("human"), description,
                              default_gamma() if gamma is None else gamma))


@dataclass(frozen=True)
class Guard:
    """A condition the task keeps and episodes start in: ``variable`` must stay on the start's
    side of ``bound`` (``distance_from_start <= 1`` for an ant that starts at 0).

    :param variable: the state variable.
    :param start: its value where episodes start.
    :param bound: where the condition breaks.
    """

    variable: str
    start: float
    bound: float

    def margin(self) -> tuple[str, str]:
        """``1 - f**2`` (0 past the bound), ``f`` the share of the way from the start to the
        bound that the next state has gone (0 on the far side of the start), and the variable read."""
        after = NEXT_PREFIX + self.variable
        share = f"torch.clamp(({after} - {self.start!r}) / {self.bound - self.start!r}, min=0.0)"
        return f"torch.clamp(1.0 - {share} ** 2, min=0.0)", after


def _expression(term: Term, description: EnvDescription, task: _Borrowed | None,
                potential: _Borrowed | None, steps: Mapping[str, float],
                guards: Sequence[Guard] = (), pairs: Sequence[tuple[str, str]] = ()) -> tuple[str, set[str]]:
    """The term's expression (without its weight) and the variables it reads."""
    kind, name = term.kind, term.variable
    if kind == "closer":  # how much nearer the goal the step came: a relative quantity, never the goal alone
        if not pairs:
            raise ValueError("a closer term needs (coordinate, goal coordinate) pairs")

        def distance(prefix: str) -> str:
            return "torch.sqrt(" + " + ".join(f"({prefix}{v} - {prefix}{g}) ** 2" for v, g in pairs) + ")"

        read = {f"{prefix}{name}" for pair in pairs for name in pair for prefix in ("", NEXT_PREFIX)}
        # divided by a coordinate's own step where one was measured: a weight of 1 pays about 1 a step
        scale = steps.get(pairs[0][0], _scale(description, pairs[0][0]))
        return f"({distance('')} - {distance(NEXT_PREFIX)}) / {scale}", read
    if kind in CATEGORY_KINDS:  # a label compared, never a magnitude
        assert name is not None and term.category is not None
        after = NEXT_PREFIX + name
        return (f"({after} == {term.category}).float() - ({name} == {term.category}).float()",
                {after, name})
    if kind == SHAPED:
        assert name is not None
        scale, after = _scale(description, name), NEXT_PREFIX + name
        return (f"GAMMA * ({after} / {scale}) * (1.0 - {TERMINATED}.float()) - {name} / {scale}",
                {after, name, TERMINATED})
    if kind == GUARDED:  # progress, paid less the nearer the kept conditions are to breaking
        assert name is not None
        progress, read = _expression(Term("progress", name, 1.0), description, task, potential, steps)
        margins = [guard.margin() for guard in guards if guard.variable != name]
        if not margins:
            raise ValueError(f"a guarded term of {name!r} needs a kept condition on another variable")
        return " * ".join([f"({progress})", *(m for m, _ in margins)]), read | {v for _, v in margins}
    if kind in STATE_KINDS:
        assert name is not None
        scale, after = _scale(description, name), NEXT_PREFIX + name
        step = steps.get(name, scale)  # the changes' own scale, where one was measured
        expressions = {
            "square": (f"-(({after} / {scale}) ** 2)", {after}),
            "linear": (f"{after} / {scale}", {after}),
            "gauss": (f"torch.exp(-(({after} / {scale}) ** 2) / {term.temperature})", {after}),
            "progress": (f"({after} - {name}) / {step}", {after, name}),
            "away": (f"({after}.abs() - {name}.abs()) / {step}", {after, name}),
            "speed": (f"({after} / {scale}).abs()", {after}),
        }
        return expressions[kind]
    if kind == "alive":
        return f"1.0 - {TERMINATED}.float()", {TERMINATED}
    if kind == "terminal":
        return f"{TERMINATED}.float()", {TERMINATED}
    if kind == "action_cost":
        total = ".sum(dim=-1)" if description.action.shape else ""
        return f"-({ACTION}.float() ** 2){total}", {ACTION}
    if kind == "task":
        assert task is not None
        arguments = ", ".join(f"{p}={p}" for p in task.parameters)
        return f"task_reward({arguments})[0]", set(task.parameters)
    if kind == "potential":
        assert potential is not None
        now = ", ".join(potential.parameters)
        after = ", ".join(NEXT_PREFIX + p for p in potential.parameters)
        return (f"GAMMA * potential({after}) * (1.0 - {TERMINATED}.float()) - potential({now})",
                {*potential.parameters, *(NEXT_PREFIX + p for p in potential.parameters), TERMINATED})
    raise ValueError(f"unknown term kind {kind!r}")


def render_program(
    terms: Sequence[Term],
    description: EnvDescription,
    task: _Borrowed | None = None,
    potential: _Borrowed | None = None,
    steps: Mapping[str, float] | None = None,
    guards: Sequence[Guard] = (),
    pairs: Sequence[tuple[str, str]] = (),
    gamma: float | None = None,
) -> str:
    """The source of the program whose components are ``terms``.

    :param terms: the weighted components (distinct names).
    :param description: the env's description (variable names and ranges).
    :param task: the env's own reward function, for ``task`` terms.
    :param potential: the built-in potential, for ``potential`` terms.
    :param steps: per variable, the scale of its ``progress`` and ``away`` terms (see
        :attr:`Motion.step`); a variable not in it uses its range, as the other terms do.
    :param guards: the task's kept conditions, for ``guarded`` terms.
    :param pairs: ``(coordinate, goal coordinate)`` pairs, for ``closer`` terms (the decrease
        of the distance between them).
    :param gamma: the discount the candidate trains with, for ``shaped`` terms; None:
        :func:`default_gamma`.
    """
    used: set[str] = set()
    lines = []
    for term in terms:
        expression, variables = _expression(term, description, task, potential, steps or {}, guards, pairs)
        used |= variables
        # Locals are prefixed so that no component shadows a helper (``potential``) or an argument.
        lines.append(f"    r_{term.name} = {term.weight!r} * ({expression})")
    parameters = [name for name in description.variables if name in used]
    components = ", ".join(f'"{term.name}": r_{term.name}' for term in terms)
    header = ['"""Reward program written by rewardlab\'s evolve proposer."""', "", "import math", "",
              "import torch", ""]
    helpers = [borrowed.source for borrowed, kind in ((task, "task"), (potential, "potential"))
               if borrowed is not None and any(term.kind == kind for term in terms)]
    kinds = {term.kind for term in terms}
    if SHAPED in kinds and "potential" not in kinds:  # the borrowed potential defines GAMMA
        helpers.append(f"GAMMA = {float(default_gamma() if gamma is None else gamma)!r}")
    body = [
        *header,
        *(f"\n{helper}\n" for helper in helpers),
        "",
        f"def compute_reward({', '.join(parameters)}):",
        *lines,
        f"    reward = {' + '.join('r_' + term.name for term in terms)}",
        f"    return reward, {{{components}}}",
    ]
    return "\n".join(body) + "\n"


def categorical_variables(description: EnvDescription) -> dict[str, tuple[str, ...]]:
    """The categorical state variables (labels, not magnitudes) and their categories.

    :param description: the env's description.
    """
    return {variable.name: variable.categories for variable in description.state
            if variable.categorical}


def scalar_variables(description: EnvDescription) -> tuple[str, ...]:
    """The state variables with one value per env, read from one observation of the env."""
    return random_motion(description, steps=0).scalars


@dataclass(frozen=True)
class Motion:
    """How an env's state variables start and move under random actions.

    :param scalars: the state variables with one value per env (terms of a whole image make
        no sense); all of them where the env cannot be made.
    :param start: per scalar variable, its mean over the envs' first observations.
    :param step: per scalar variable without a declared range, its mean change in one step:
        a ``progress`` term divided by it pays about 1 a step for moving as fast as random
        actions move the variable, whatever its unit and the env's step time (a Hopper's
        x changes by millimetres a step, so ``(x' - x) / range`` would pay almost nothing
        beside any other term). Variables with a range keep it, as the other terms do.
    """

    scalars: tuple[str, ...]
    start: dict[str, float]
    step: dict[str, float]


def random_motion(description: EnvDescription, steps: int = 100) -> Motion:
    """The :class:`Motion` of the description's variables, measured on 8 copies of the env
    from seed 0 with seeded random actions, so that the same description gives the same
    figures; no figures where the env cannot be made.

    :param description: the env's description.
    :param steps: how many steps to measure the changes over (0: the first observations only).
    """
    from rewardlab import envs

    try:
        env = envs.make(description.env_id, num_envs=8, seed=0)
    except ValueError:
        return Motion(description.state_names, {}, {})
    try:
        env.action_space.seed(0)
        obs, _ = env.reset()
        first = {name: value for name, value in description.state_tensors(obs).items()
                 if tuple(value.shape) == (env.num_envs,)}
        start = {name: float(value.float().mean()) for name, value in first.items()}
        unbounded = [variable.name for variable in description.state if variable.name in first
                     and not any(b is not None and math.isfinite(b) for b in (variable.low, variable.high))]
        totals = dict.fromkeys(unbounded, 0.0)
        try:
            for _ in range(steps if unbounded else 0):
                obs_next, _, _, _, info = env.step(env.action_space.sample())
                before = description.state_tensors(obs, unbounded)
                after = description.state_tensors(info["final_obs"], unbounded)  # the true next state
                for name in unbounded:
                    totals[name] += float((after[name] - before[name]).abs().float().mean()) / steps
                obs = obs_next
        except Exception as error:  # the search goes on; the training will meet the env's own error
            warnings.warn(f"{description.env_id} could not be stepped with random actions ({type(error).__name__}: "
                          f"{error}); progress terms of variables without a range divide by 1", stacklevel=2)
            totals = {}
    finally:
        env.close()
    step = {name: _round(total) for name, total in totals.items() if math.isfinite(total) and total > 0}
    return Motion(tuple(first), {name: value for name, value in start.items() if math.isfinite(value)}, step)


def focus_variables(description: EnvDescription) -> tuple[str, ...]:
    """The state variables that the description's summary or success metric names, in order.

    :param description: the env's description.
    """
    text = f"{description.summary} {description.success_metric}"
    return tuple(name for name in description.state_names if re.search(rf"(?<![\w.]){name}(?!\w)", text))


class EvolveRandomProposer:
    """Proposes reward programs by mutation and recombination of the fittest (see the module).

    :param description: the env's description.
    :param seed: seeds the proposals (with the iteration number).
    :param references: the env's reference programs (``{"sparse", "human"}``), which give
        the ``task`` and ``potential`` terms; without them those terms are not used.
    :param gamma: the discount the candidates train with (their learner's config's
        ``discount("potential")``), for the ``potential`` term; None: PPO's default.
    """

    def __init__(
        self,
        description: EnvDescription,
        seed: int = 0,
        references: dict[str, RewardProgram] | None = None,
        gamma: float | None = None,
    ):
        self.description = description
        self.seed = seed
        self._task, self._potential = borrow_references(references, description, gamma)
        kinds = ["alive", "terminal"]
        if description.action.dtype.startswith("float"):
            kinds.append("action_cost")
        if self._task is not None:
            kinds.append("task")
        if self._potential is not None:
            kinds.append("potential")
        self._global_kinds = tuple(kinds)
        self._focus = focus_variables(description) if len(description.state) >= FOCUS_MIN_VARIABLES else ()
        scalars = scalar_variables(description)
        #: the numbers with one value per env (terms of a whole image make no sense)
        labels = categorical_variables(description)
        self._names = tuple(name for name in scalars if name not in labels)
        self._focus = tuple(name for name in self._focus if name in self._names)
        #: ``(variable, value)`` of every named value of a categorical variable, for ``event`` terms
        self._labels = tuple((name, value) for name, categories in labels.items() if name in scalars
                             for value, label in enumerate(categories) if label)

    def render(self, terms: Sequence[Term]) -> str:
        """The source of a program made of ``terms``.

        :param terms: the components.
        """
        return render_program(terms, self.description, self._task, self._potential)

    def propose(
        self, iteration: int, count: int, history: Sequence[Candidate]
    ) -> list[tuple[list[dict[str, object]], str]]:
        """``count`` new programs for ``iteration``, as ``(genome, source)`` pairs.

        :param iteration: 0-based iteration (seeds the proposals with :attr:`seed`).
        :param count: how many.
        :param history: every candidate of the earlier iterations, with its results.
        """
        rng = random.Random(f"evolve:{self.seed}:{iteration}")
        parents = sorted(
            (c for c in history if c.ok and c.genome is not None),
            key=lambda c: (-(c.fitness or 0.0), c.iteration, c.sample),
        )
        parents = parents[: max(2, min(POOL_SIZE, math.ceil(len(parents) / 2)))]
        seen = {c.source for c in history if c.source}
        proposals: list[tuple[list[dict[str, object]], str]] = []
        for index in range(count):
            for _ in range(MAX_TRIES):
                if parents:
                    terms = self._child(rng, parents)
                elif iteration == 0 and index == 0 and self._task is not None:
                    terms = [Term("task", None, 1.0)]  # the env's own reward: a safe fallback
                else:
                    terms = self._random_terms(rng)
                source = self.render(terms)
                if source not in seen:
                    break
            seen.add(source)
            proposals.append(([term.record() for term in terms], source))
        return proposals

    def _random_term(self, rng: random.Random) -> Term:
        if self._labels and rng.random() < 0.3:
            variable, value = rng.choice(self._labels)
            magnitude = _round(math.exp(rng.uniform(math.log(0.05), math.log(5.0))))
            return Term("event", variable, rng.choice((-1.0, 1.0)) * magnitude, category=value)
        if self._names and rng.random() < 0.6:
            names = self._focus if self._focus and rng.random() < 0.5 else self._names
            kind, variable = rng.choice(STATE_KINDS), rng.choice(names)
        else:
            kind, variable = rng.choice(self._global_kinds), None
        magnitude = _round(math.exp(rng.uniform(math.log(0.05), math.log(5.0))))
        sign = 1.0 if kind in ("task", "potential", "action_cost") else rng.choice((-1.0, 1.0))
        if kind == "action_cost":
            magnitude = _round(magnitude * 0.01)
        temperature = _round(math.exp(rng.uniform(math.log(0.1), math.log(3.0)))) if kind == "gauss" else 1.0
        return Term(kind, variable, sign * magnitude, temperature)

    def _random_terms(self, rng: random.Random) -> list[Term]:
        terms: dict[str, Term] = {}
        if self._task is not None and rng.random() < 0.5:
            terms["task"] = Term("task", None, 1.0)
        for _ in range(rng.randint(1, 3)):
            term = self._random_term(rng)
            terms.setdefault(term.name, term)
        return list(terms.values())

    @staticmethod
    def _tournament(rng: random.Random, parents: Sequence[Candidate]) -> Candidate:
        first, second = rng.choice(parents), rng.choice(parents)
        return first if (first.fitness or 0.0) >= (second.fitness or 0.0) else second

    def _child(self, rng: random.Random, parents: Sequence[Candidate]) -> list[Term]:
        mother = self._tournament(rng, parents)
        terms = {term.name: term for term in self._guided(rng, mother)}
        if len(parents) > 1 and rng.random() < 0.5:
            father = self._tournament(rng, parents)
            for term in father.genome or []:
                candidate = Term(**term)
                if rng.random() < 0.5:
                    terms[candidate.name] = candidate
        for _ in range(rng.randint(1, 2)):
            terms = self._mutate(rng, terms)
        if not terms:
            terms = {term.name: term for term in self._random_terms(rng)}
        return list(terms.values())[:MAX_TERMS]

    def _guided(self, rng: random.Random, parent: Candidate) -> list[Term]:
        """The parent's terms, changed where its reflection found a problem."""
        terms = [Term(**term) for term in parent.genome or []]
        assert parent.result is not None
        notes = {note.component: note.kind for note in component_notes(parent.result.curve)}
        changed = []
        for term in terms:
            kind = notes.get(term.name)
            if kind == "constant":
                if rng.random() < 0.7 and len(terms) > 1:
                    continue
                term = replace(term, weight=_round(term.weight * 3.0))
            elif kind == "dominant":
                term = replace(term, weight=_round(term.weight * 0.3))
            changed.append(term)
        if parent.signals is not None and parent.signals.hacking and len(changed) > 1:
            changed.pop(rng.randrange(len(changed)))
        return changed or terms

    def _mutate(self, rng: random.Random, terms: dict[str, Term]) -> dict[str, Term]:
        terms = dict(terms)
        operation = rng.random()
        if operation < 0.45 and terms:
            name = rng.choice(sorted(terms))
            term = terms[name]
            weight = term.weight * math.exp(rng.gauss(0.0, 0.5))
            if term.kind not in ("task", "potential") and rng.random() < 0.1:
                weight = -weight
            temperature = _round(term.temperature * math.exp(rng.gauss(0.0, 0.5))) if term.kind == "gauss" else 1.0
            terms[name] = replace(term, weight=_round(weight), temperature=temperature)
        elif operation < 0.7 and len(terms) < MAX_TERMS:
            term = self._random_term(rng)
            terms.setdefault(term.name, term)
        elif operation < 0.85 and len(terms) > 1:
            del terms[rng.choice(sorted(terms))]
        elif terms:
            del terms[rng.choice(sorted(terms))]
            new = self._random_term(rng)
            terms.setdefault(new.name, new)
        return terms
