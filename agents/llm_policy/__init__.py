"""An LLM as the policy, imported from one place: the policy and the text codecs of the envs.

- :class:`LLMPolicy`: acts through ``predict`` like our other agents, one chat request per
  env (:mod:`rewardlab.agents.llm_policy.policy`);
- :func:`codec_for` / :class:`TextCodec`: an env's observations in words and the answer
  back as an action (:mod:`rewardlab.agents.llm_policy.codecs`).

The policy takes a chat client as a plain object, so this package imports nothing of
``rewardlab.llm_reward``: :func:`rewardlab.llm_reward.clients.make_client` makes one.
``rewardlab llm-play`` (:mod:`rewardlab.app.llm_play`) plays episodes with it.

Example::

    from rewardlab.agents.llm_policy import LLMPolicy, codec_for
    from rewardlab.llm_reward.clients import make_client

    policy = LLMPolicy(make_client("ollama:qwen2.5:7b"), codec_for("CartPole-v1"), history=4)
"""

from rewardlab.agents.llm_policy.codecs import (
    CODEC_ENVS,
    ContinuousActions,
    NamedActions,
    TextCodec,
    classic_codec,
    codec_for,
    deepsea_codec,
    fruit_codec,
    minigrid_codec,
)
from rewardlab.agents.llm_policy.policy import LLMPolicy

__all__ = [
    "CODEC_ENVS",
    "ContinuousActions",
    "LLMPolicy",
    "NamedActions",
    "TextCodec",
    "classic_codec",
    "codec_for",
    "deepsea_codec",
    "fruit_codec",
    "minigrid_codec",
]
