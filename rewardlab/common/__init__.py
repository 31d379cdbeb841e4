"""Building blocks every layer shares, each written once: the bottom layer of the library.

- :class:`~rewardlab.common.running_stats.RunningMeanStd`: running mean and variance of
  batches (observation and reward normalisation in PPO, RND's whitening and bonus scale);
- :func:`~rewardlab.common.networks.mlp` and the seeded-construction helpers;
- :func:`~rewardlab.common.components.with_components`: how a wrapper adds its terms to
  ``info["reward_components"]``.

It imports nothing else of rewardlab.
"""
