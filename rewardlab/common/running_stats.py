"""Running mean and variance of batches of tensors, kept on the tensors' device."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class RunningMeanStd(nn.Module):
    """Mean and variance of every sample seen so far, updated a batch at a time.

    The statistics are float64 buffers (so ``state_dict`` carries them and ``.to(device)``
    moves them); the batch update is Chan et al.'s parallel algorithm, as in SB3's
    ``RunningMeanStd``. ``normalize`` uses float32 copies refreshed at each update, so
    normalising in the rollout loop costs two element-wise ops and a clamp.

    Example::

        rms = RunningMeanStd(shape=(4,))
        rms.update(torch.randn(256, 4) * 3 + 1)
        whitened = rms.normalize(torch.randn(8, 4), clip=10.0)

    :param shape: shape of one sample (``()`` for scalars).
    :param epsilon: the initial count (SB3's ``RunningMeanStd``'s).
    :param var_epsilon: added to the variance when normalising or scaling (SB3's
        ``VecNormalize``'s ``epsilon``): small, so that a feature that varies little, such
        as MountainCar's velocity (standard deviation about 0.006 over its first hundred
        steps), is still whitened to unit scale rather than held at a fraction of it.
    :param device: where the statistics live.
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor
    _mean32: torch.Tensor
    _inv_std32: torch.Tensor

    def __init__(
        self,
        shape: tuple[int, ...] = (),
        epsilon: float = 1e-4,
        var_epsilon: float = 1e-8,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.epsilon, self.var_epsilon = epsilon, var_epsilon
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64, device=device))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64, device=device))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64, device=device))
        self.register_buffer("_mean32", torch.zeros(shape, device=device), persistent=False)
        self.register_buffer("_inv_std32", torch.ones(shape, device=device), persistent=False)
        self._refresh()

    @torch.no_grad()
    def update(self, batch: torch.Tensor) -> None:
        """Fold a batch into the statistics.

        :param batch: tensor of shape ``(B, *shape)``.
        """
        batch = batch.to(torch.float64)
        batch_mean = batch.mean(dim=0)
        batch_var = batch.var(dim=0, unbiased=False)
        batch_count = batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean += delta * batch_count / total
        m2 = (
            self.var * self.count
            + batch_var * batch_count
            + delta.square() * self.count * batch_count / total
        )
        self.var.copy_(m2 / total)
        self.count.copy_(total)
        self._refresh()

    def normalize(self, x: torch.Tensor, clip: float | None = None) -> torch.Tensor:
        """Return ``(x - mean) / sqrt(var + var_epsilon)``, clamped to ``[-clip, clip]`` if given.

        :param x: tensor whose trailing dimensions match ``shape``.
        :param clip: bound on the absolute value of the result, or None.
        """
        return whiten(x, self._mean32, self._inv_std32, clip)

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``x / sqrt(var + var_epsilon)`` (no centring), as SB3 scales rewards.

        :param x: tensor whose trailing dimensions match ``shape``.
        """
        return x * self._inv_std32

    @property
    def whitening(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, 1 / sqrt(var + var_epsilon))`` in float32, what :meth:`normalize` whitens
        with (:func:`whiten`'s arguments): tensors refreshed in place at each update, so a
        compiled function given them as inputs sees the current statistics."""
        return self._mean32, self._inv_std32

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self._refresh()

    def _refresh(self) -> None:
        self._mean32.copy_(self.mean)
        self._inv_std32.copy_(torch.rsqrt(self.var + self.var_epsilon))


def whiten(x: torch.Tensor, mean: torch.Tensor, inv_std: torch.Tensor, clip: float | None) -> torch.Tensor:
    """``(x - mean) * inv_std``, clamped to ``[-clip, clip]`` if given: what
    :meth:`RunningMeanStd.normalize` computes from its statistics, as a function of them
    (PPO's compiled rollout passes the statistics in as inputs).

    :param x: the values.
    :param mean: the mean (float32).
    :param inv_std: ``1 / sqrt(var + var_epsilon)`` (float32).
    :param clip: bound on the absolute value of the result, or None.
    """
    out = (x - mean) * inv_std
    return out if clip is None else out.clamp_(-clip, clip)
