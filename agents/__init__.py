"""rewardlab: agents.

Names are imported on first use (``from agents import PPO`` loads ``agents.ppo`` then),
so ``import agents`` stays fast and does not pull in torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents.hra import HRA
    from agents.llm_policy import LLMPolicy
    from agents.ppo import PPO

# public name -> the module that defines it
_LAZY: dict[str, str] = {"HRA": "agents.hra", "LLMPolicy": "agents.llm_policy", "PPO": "agents.ppo"}

__all__ = ["HRA", "LLMPolicy", "PPO"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agents' has no attribute {name!r}")
