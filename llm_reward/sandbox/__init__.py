"""The reward-program sandbox, one component: jobs on untrusted code in an isolated process.

- :func:`run_sandboxed` (:mod:`~rewardlab.llm_reward.sandbox.runner`): runs a job
  ``"module:function"`` in a worker with OS limits and Landlock, and returns its JSON
  result as a :class:`SandboxRun`;
- :mod:`~rewardlab.llm_reward.sandbox.forkserver`: the process that imported torch once
  and forks the workers;
- :class:`Guard` (:mod:`~rewardlab.llm_reward.sandbox.guard`): the audit hooks installed
  in the worker before the job runs.
"""

from rewardlab.llm_reward.sandbox.guard import Guard, SandboxViolation
from rewardlab.llm_reward.sandbox.runner import Limits, SandboxRun, landlock_abi, run_sandboxed

__all__ = ["Guard", "Limits", "SandboxRun", "SandboxViolation", "landlock_abi", "run_sandboxed"]
