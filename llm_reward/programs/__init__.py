"""Reward programs: LLM-written reward code found in an answer, checked, and applied to envs.

- :func:`extract_code` (:mod:`~rewardlab.llm_reward.programs.answers`): the program's source
  found in an LLM answer;
- :class:`RewardProgram` (:mod:`~rewardlab.llm_reward.programs.source`): that source,
  statically checked (:class:`CheckError` lists the findings, from
  :mod:`~rewardlab.llm_reward.programs.checks`);
- :class:`RewardFunction` (:mod:`~rewardlab.llm_reward.programs.program`): the program
  loaded and called on batches, each failure a :class:`ProgramError`
  (:mod:`~rewardlab.llm_reward.programs.errors`);
- :func:`reference_programs` (:mod:`~rewardlab.llm_reward.programs.references`): each env's
  own sparse reward and a human-written dense one, as programs;
- :class:`ProgramReward` (:mod:`~rewardlab.llm_reward.programs.wrapper`): the batched-env
  wrapper that trains on a program's reward;
- :func:`load_reward` (:mod:`~rewardlab.llm_reward.programs.loading`): a reward program
  file (a search's ``best_reward.py``) as a Gymnasium or batched-env wrapper.

What a program may know of an env is its description, :func:`rewardlab.envs.describe`.
"""

from rewardlab.llm_reward.programs.answers import extract_code
from rewardlab.llm_reward.programs.checks import CheckError, Finding
from rewardlab.llm_reward.programs.errors import ProgramError
from rewardlab.llm_reward.programs.loading import GymnasiumProgramReward, LoadedReward, load_reward
from rewardlab.llm_reward.programs.program import RewardFunction
from rewardlab.llm_reward.programs.references import (
    reference_programs,
    register_reference_programs,
    registered_reference_programs,
)
from rewardlab.llm_reward.programs.source import RewardProgram
from rewardlab.llm_reward.programs.wrapper import ProgramReward

__all__ = [
    "CheckError",
    "Finding",
    "GymnasiumProgramReward",
    "LoadedReward",
    "ProgramError",
    "ProgramReward",
    "RewardFunction",
    "RewardProgram",
    "extract_code",
    "load_reward",
    "reference_programs",
    "register_reference_programs",
    "registered_reference_programs",
]
