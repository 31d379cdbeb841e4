"""rewardlab.llm_reward: LLM-written reward programs, checked, sandboxed and evaluated.

    >>> from rewardlab import llm_reward
    >>> print(llm_reward.describe("CartPole-v1").to_prompt())  # doctest: +SKIP
    >>> program = llm_reward.RewardProgram.from_llm_answer(answer_text)  # doctest: +SKIP
    >>> result = llm_reward.evaluate(program, "CartPole-v1", steps=50_000)  # doctest: +SKIP

- :func:`describe` / :func:`register_description`: what a reward program may know of an env;
- :class:`RewardProgram`: source found in an LLM answer and statically checked
  (:class:`CheckError` lists the findings);
- :func:`train_on_program` (and :func:`evaluate`, its keyword form): trains
  ``rewardlab.agents.PPO`` on the program's reward inside a sandboxed process and measures
  the task's true fitness (:class:`TrainingRun`);
- :func:`reference_programs`: the env's own (sparse) reward and a human-written dense one,
  as programs, for baselines;
- :class:`ProgramReward`: the batched-env wrapper that trains on a program's reward
  (in-process: for trusted programs);
- :func:`load_reward`: a reward program file (a search's ``best_reward.py``) as a Gymnasium
  or batched-env wrapper.

Five subpackages, one concern each (``docs/architecture.md``):
:mod:`~rewardlab.llm_reward.programs` (reward programs: parse, check, references, the
reward wrappers), :mod:`~rewardlab.llm_reward.sandbox` (the isolated worker, its fork
server and guard), :mod:`~rewardlab.llm_reward.training` (training on a program's reward in
the sandbox, measured outside it), :mod:`~rewardlab.llm_reward.clients` (OpenAI-compatible
LLM clients) and :mod:`~rewardlab.llm_reward.search` (the reward-code search behind
``rewardlab search``).

See ``docs/reward_programs.md``.
"""

from rewardlab.envs.descriptions import (
    ActionVariable,
    EnvDescription,
    StateVariable,
    describe,
    register_description,
    registered_descriptions,
)
from rewardlab.llm_reward.programs import (
    CheckError,
    Finding,
    LoadedReward,
    ProgramError,
    ProgramReward,
    RewardProgram,
    load_reward,
    reference_programs,
    register_reference_programs,
)
from rewardlab.llm_reward.training import (
    Checkpoint,
    Failure,
    SeedRun,
    TrainingRun,
    evaluate,
    train_on_program,
)

EvalResult = TrainingRun
"""The earlier name of :class:`TrainingRun`."""

__all__ = [
    "ActionVariable",
    "CheckError",
    "Checkpoint",
    "EnvDescription",
    "EvalResult",
    "Failure",
    "Finding",
    "LoadedReward",
    "ProgramError",
    "ProgramReward",
    "RewardProgram",
    "SeedRun",
    "StateVariable",
    "TrainingRun",
    "describe",
    "evaluate",
    "load_reward",
    "reference_programs",
    "register_reference_programs",
    "register_description",
    "registered_descriptions",
    "train_on_program",
]
