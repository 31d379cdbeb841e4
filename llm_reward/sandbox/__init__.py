"""The sandbox, one component: jobs on untrusted code in an isolated process.

It knows nothing of what the jobs do: the caller hands it a job (a module-level function)
and, where the untrusted code must run apart from the job, a companion; what a job is and
the messages its processes exchange are :mod:`~rewardlab.llm_reward.sandbox.protocol`.
Training on a reward program is one such caller (:mod:`rewardlab.llm_reward.training`).

- :func:`run_sandboxed` (:mod:`~rewardlab.llm_reward.sandbox.runner`): runs a job in a
  worker with OS limits and Landlock, and returns its JSON result as a :class:`SandboxRun`;
- :mod:`~rewardlab.llm_reward.sandbox.forkserver`: the process that imported torch once
  and forks the workers; :mod:`~rewardlab.llm_reward.sandbox.worker`: a worker's steps,
  from the inside;
- :class:`Guard` (:mod:`~rewardlab.llm_reward.sandbox.guard`): the audit hooks installed
  in the worker before the job runs.
"""

from rewardlab.llm_reward.sandbox.guard import Guard, SandboxViolation
from rewardlab.llm_reward.sandbox.runner import Limits, SandboxRun, landlock_abi, run_sandboxed

__all__ = ["Guard", "Limits", "SandboxRun", "SandboxViolation", "landlock_abi", "run_sandboxed"]
