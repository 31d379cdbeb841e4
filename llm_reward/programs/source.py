"""A reward program's source: normalised, statically checked, its parameters read.

:class:`RewardProgram` is plain data (it crosses into the sandbox as a dict); nothing here
runs the program. What it may take of an env is that env's description
(:func:`rewardlab.envs.describe`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rewardlab.envs.descriptions import EnvDescription, describe
from rewardlab.llm_reward.programs.answers import extract_code
from rewardlab.llm_reward.programs.checks import (
    CheckError,
    check_source,
    check_tree,
    find_reward_function,
    parse_source,
)
from rewardlab.llm_reward.programs.components import component_name_notes
from rewardlab.llm_reward.programs.normalize import normalize_source

__all__ = ["RewardProgram"]

@dataclass(frozen=True)
class RewardProgram:
    """The source of a reward program that passed the env-independent static checks.

    Build one with :meth:`from_source` or :meth:`from_llm_answer`; both raise
    :class:`~rewardlab.llm_reward.programs.checks.CheckError` listing every problem found.
    Both first make the code plain
    (:func:`~rewardlab.llm_reward.programs.normalize.normalize_source`: annotations, typing
    imports and TorchScript decorators removed, every line kept).

    :param source: the program text (after normalisation).
    :param function_name: the reward function's name (``compute_reward`` unless the program
        defines a single function under another name).
    :param parameters: the reward function's argument names, in order.
    :param defaults: the arguments that have a default value; one that is not a variable
        of the env is a constant: it is never passed.
    :param notes: what normalisation removed, one sentence each, for the report.
    """

    source: str
    function_name: str
    parameters: tuple[str, ...]
    defaults: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @classmethod
    def from_source(cls, source: str, env: str | EnvDescription | None = None) -> RewardProgram:
        """Normalise ``source``, check it and wrap it: parsed once, checked once.

        :param source: Python source defining the reward function.
        :param env: an env id or its description: the checks include that the arguments are
            variables it declares (as :meth:`check` does); ``None``: every check but that one.
        :raises CheckError: the source failed a static check.
        """
        normalized = normalize_source(source)
        tree, findings = parse_source(normalized.source)
        if tree is not None:
            if env is None:
                findings = check_tree(tree)
            else:
                description = describe(env) if isinstance(env, str) else env
                meanings = {variable.name: variable.meaning for variable in description.state}
                findings = check_tree(tree, description.variables, meanings)
        if findings:
            raise CheckError(findings, normalized.source)
        assert tree is not None
        function = find_reward_function(tree)
        assert function is not None, "check_source reports a program without a reward function"
        arguments = function.args
        positional = (*arguments.posonlyargs, *arguments.args)
        parameters = tuple(a.arg for a in (*positional, *arguments.kwonlyargs))
        given = len(arguments.defaults)
        with_default = positional[len(positional) - given:] if given else ()
        keyword_defaults = zip(arguments.kwonlyargs, arguments.kw_defaults)
        defaults = tuple(a.arg for a in with_default) + tuple(
            a.arg for a, value in keyword_defaults if value is not None
        )
        notes = (*normalized.notes, *component_name_notes(function))
        return cls(source=normalized.source, function_name=function.name, parameters=parameters,
                   defaults=defaults, notes=notes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RewardProgram:
        """The program :func:`dataclasses.asdict` made into ``data`` (JSON data: lists for tuples).
        It is not checked again: rebuild only what a check made.

        :param data: the plain data.
        :raises KeyError: a field is missing.
        :raises TypeError: a field is not of its kind.
        """
        return cls(source=str(data["source"]), function_name=str(data["function_name"]),
                   parameters=tuple(data["parameters"]), defaults=tuple(data["defaults"]),
                   notes=tuple(data["notes"]))

    @classmethod
    def from_llm_answer(cls, answer: str) -> RewardProgram:
        """Find the program in an LLM's reply (see :func:`extract_code`) and check it.

        :param answer: the whole reply: prose, one or several code blocks.
        :raises CheckError: no program found, or it failed a static check.
        """
        return cls.from_source(extract_code(answer))

    def check(self, env: str | EnvDescription) -> None:
        """Run every static check, including that the arguments are variables ``env`` declares.

        :param env: an env id or its description.
        :raises CheckError: listing every finding.
        """
        description = describe(env) if isinstance(env, str) else env
        meanings = {variable.name: variable.meaning for variable in description.state}
        findings = check_source(self.source, description.variables, meanings)
        if findings:
            raise CheckError(findings, self.source)

    def inputs(self, description: EnvDescription) -> tuple[str, ...]:
        """The arguments the program is called with for ``description``'s env: its
        parameters, less those with a default that the env does not declare (constants)."""
        declared = set(description.variables)
        return tuple(name for name in self.parameters
                     if name in declared or name not in self.defaults)

    def constant_notes(self, description: EnvDescription) -> tuple[str, ...]:
        """A note for each parameter that is a constant for ``description``'s env."""
        declared = set(description.variables)
        return tuple(
            f"`{name}` has a default and is not a variable of the env: it is a constant "
            "(never passed)"
            for name in self.parameters if name in self.defaults and name not in declared
        )
