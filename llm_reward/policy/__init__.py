"""An LLM as the policy: text codecs of the envs and the ``rewardlab llm-play`` command.

The policy itself is :class:`agents.LLMPolicy` (it takes a chat client and a codec, so
``agents`` needs nothing of ``llm_reward``); this package holds what is LLM-specific:

- :func:`codec_for` / :class:`TextCodec`: an env's observations in words and the answer
  back as an action (:mod:`llm_reward.policy.codecs`);
- :func:`llm_reward.policy.cli.play`: episodes of a policy in a batched env, logged with the
  keys of RL runs; the same module registers ``rewardlab llm-play``.
"""

from llm_reward.policy.codecs import (
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

__all__ = [
    "CODEC_ENVS",
    "ContinuousActions",
    "NamedActions",
    "TextCodec",
    "classic_codec",
    "codec_for",
    "deepsea_codec",
    "fruit_codec",
    "minigrid_codec",
]
