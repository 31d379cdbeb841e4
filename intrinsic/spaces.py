"""Turning batches of observations and actions into flat float vectors for the modules' networks.

``Box`` batches are flattened; ``Discrete``, ``MultiDiscrete`` and ``MultiBinary`` ones become
(concatenated) one-hot vectors. Other spaces (``Dict``, ``Tuple``, ``Text``, ...) are refused
with a message that names the space.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces

SUPPORTED = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def check_space(space: object, module: str, role: str) -> spaces.Space:
    """Return ``space`` if a module can read it, else raise ``ValueError`` naming it.

    :param space: the space to check
    :param module: the module's class name, for the message
    :param role: ``"observation"`` or ``"action"``
    """
    if not isinstance(space, SUPPORTED):
        raise ValueError(
            f"{module} cannot handle the {role} space {space!r}: it takes Box, Discrete, "
            "MultiDiscrete or MultiBinary spaces; flatten a Dict or Tuple space first "
            "(e.g. gymnasium.wrappers.FlattenObservation)"
        )
    return space


def flat_dim(space: spaces.Space) -> int:
    """The length of the vectors :func:`encode` makes for ``space``.

    :param space: a supported space
    """
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    return int(np.prod(space.shape))


def categories(space: spaces.Space) -> list[int]:
    """The number of choices of each categorical component of a discrete space.

    :param space: ``Discrete``, ``MultiDiscrete`` or ``MultiBinary``
    """
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(space.nvec).flatten()]
    return [2] * int(np.prod(space.shape))


def indices(space: spaces.Space, x: torch.Tensor) -> torch.Tensor:
    """The zero-based category indices ``(N, k)`` of a batch of a discrete space.

    :param space: ``Discrete``, ``MultiDiscrete`` or ``MultiBinary``
    :param x: the batch, ``(N,)`` or ``(N, 1)`` for ``Discrete``, ``(N, *shape)`` otherwise
    :raises ValueError: values outside the space
    """
    index = torch.round(x).long() if x.is_floating_point() else x.long()
    index = index.reshape(len(index), -1)
    start = getattr(space, "start", None)
    if start is not None:
        index = index - torch.as_tensor(np.asarray(start).reshape(-1), device=index.device)
    sizes = torch.as_tensor(categories(space), device=index.device)
    if index.shape[1] != len(sizes) or bool(((index < 0) | (index >= sizes)).any()):
        raise ValueError(
            f"a batch of shape {tuple(x.shape)} holds values outside the space {space}"
        )
    return index


def encode(space: spaces.Space, x: torch.Tensor) -> torch.Tensor:
    """A float32 batch ``(N, flat_dim(space))``: flattened ``Box`` values or one-hot categories.

    :param space: a supported space
    :param x: the batch
    :raises ValueError: the batch does not fit the space
    """
    if isinstance(space, spaces.Box):
        if tuple(x.shape[1:]) != tuple(space.shape):
            raise ValueError(
                f"a batch of shape {tuple(x.shape)} does not fit the space {space}: "
                f"expected (N, {', '.join(map(str, space.shape))})"
            )
        return x.reshape(len(x), -1).float()
    if isinstance(space, spaces.MultiBinary):
        return indices(space, x).float()
    index = indices(space, x)
    one_hots = [F.one_hot(index[:, i], n) for i, n in enumerate(categories(space))]
    return torch.cat(one_hots, dim=1).float()
