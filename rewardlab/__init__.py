"""rewardlab: reward engineering for reinforcement learning.

One namespace over the library's layers, lowest first (``docs/architecture.md``):

- :mod:`rewardlab.envs`: the batched-env contract, batched envs in torch, adapters, env descriptions;
- :mod:`rewardlab.shaping`: potential-based reward shaping and its potentials;
- :mod:`rewardlab.intrinsic`: RND, count-based and surprise bonuses and their fusions;
- :mod:`rewardlab.agents`: our PPO and HRA, the LLM policy, the SB3 glue;
- :mod:`rewardlab.llm_reward`: reward programs, their sandbox, LLM clients, the search;
- :mod:`rewardlab.app`: the ``rewardlab`` command.

Importing ``rewardlab`` imports none of them.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rewardlab")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
