"""rewardlab.agents: learners (our PPO, HRA, the LLM policy) and their shared blocks.

Names are imported on first use (``from rewardlab.agents import PPO`` loads
``rewardlab.agents.ppo`` then), so importing the package stays fast and does not pull in
torch. The SB3 glue is :mod:`rewardlab.agents.sb3` and :mod:`rewardlab.agents.sb3_intrinsic`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rewardlab.agents.hra import HRA
    from rewardlab.agents.llm_policy import LLMPolicy
    from rewardlab.agents.ppo import PPO

# public name -> the module that defines it
_LAZY: dict[str, str] = {
    "HRA": "rewardlab.agents.hra",
    "LLMPolicy": "rewardlab.agents.llm_policy",
    "PPO": "rewardlab.agents.ppo",
}

__all__ = ["HRA", "LLMPolicy", "PPO"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rewardlab.agents' has no attribute {name!r}")
