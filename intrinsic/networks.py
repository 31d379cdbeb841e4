"""Small networks for the intrinsic modules, built reproducibly from a seed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn


def mlp(in_features: int, hidden_sizes: Sequence[int], out_features: int) -> nn.Sequential:
    """A ReLU multi-layer perceptron with PyTorch's default initialisation.

    :param in_features: input width
    :param hidden_sizes: the width of each hidden layer
    :param out_features: output width
    """
    layers: list[nn.Module] = []
    width = in_features
    for size in hidden_sizes:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """Run the block with torch's global generator seeded, leaving the caller's stream untouched.

    :param seed: the seed; ``None`` runs the block on the global stream as it is
    """
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def generator(seed: int | None) -> torch.Generator:
    """A CPU generator for a module's own sampling (minibatches, subsets, hashes).

    :param seed: the seed; ``None`` seeds it from the OS
    """
    gen = torch.Generator()
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    return gen


def minibatches(size: int, minibatch_size: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
    """Shuffled index minibatches covering ``range(size)`` once.

    :param size: how many rows
    :param minibatch_size: rows per minibatch (the last one may be smaller)
    :param gen: the generator that shuffles
    """
    order = torch.randperm(size, generator=gen)
    yield from order.split(minibatch_size)
