"""Training on an untrusted reward: one layer, below the search and above the sandbox.

- :func:`train_on_program` (:mod:`~rewardlab.llm_reward.training.run`): check a reward
  program once, train PPO on it in the sandbox, measure each shipped policy on the env's own
  reward, and return a :class:`TrainingRun`; the search trains every candidate with it and
  ``rewardlab train --reward-program`` trains with it too. :func:`evaluate` is the same with
  the budget's parts as keywords.
- :mod:`~rewardlab.llm_reward.training.job`: the job the sandbox runs (handed to it as a
  function) and its companion, the one process that loads the program;
  :mod:`~rewardlab.llm_reward.training.reward_process` is how the two talk.
- :mod:`~rewardlab.llm_reward.training.snapshots`: policies as plain data, and how the caller
  measures them; :mod:`~rewardlab.llm_reward.training.compiled`: what the fork server loads
  before it forks (modules, PPO's compiled graphs).
- :mod:`~rewardlab.llm_reward.training.checking`: an answer or a source read into a checked
  program in a child; :mod:`~rewardlab.llm_reward.training.failures`: why a training failed;
  :mod:`~rewardlab.llm_reward.training.stopping`: early stopping at rungs.
"""

from rewardlab.llm_reward.training.failures import Failure
from rewardlab.llm_reward.training.records import Budget, Checkpoint, Progress, SeedRun, TrainingRun
from rewardlab.llm_reward.training.run import evaluate, train_on_program

__all__ = ["Budget", "Checkpoint", "Failure", "Progress", "SeedRun", "TrainingRun", "evaluate", "train_on_program"]
