"""The MLP builder and the helpers that build and sample reproducibly from a seed."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}
INITIALISATIONS = ("orthogonal", "default")


def mlp(
    in_features: int,
    hidden_sizes: Sequence[int],
    out_features: int,
    activation: str = "tanh",
    init: str = "orthogonal",
    output_gain: float = 1.0,
) -> nn.Sequential:
    """A multi-layer perceptron: ``Linear``, activation, ..., ``Linear``.

    ``init="orthogonal"`` is SB3's and CleanRL's actor-critic initialisation: hidden
    layers get gain ``sqrt(2)``, the output layer ``output_gain`` (0.01 for a policy head,
    1 for a value head), biases start at zero. ``init="default"`` keeps ``nn.Linear``'s
    own (uniform in ``+-1/sqrt(fan_in)``), as RND, ICM and HRA's reference code use.

    :param in_features: size of the input.
    :param hidden_sizes: width of each hidden layer (may be empty: a linear map).
    :param out_features: size of the output.
    :param activation: ``"tanh"`` or ``"relu"``.
    :param init: ``"orthogonal"`` or ``"default"``.
    :param output_gain: orthogonal-init gain of the last layer.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r} is not one of {sorted(ACTIVATIONS)}")
    if init not in INITIALISATIONS:
        raise ValueError(f"init={init!r} is not one of {list(INITIALISATIONS)}")
    orthogonal = init == "orthogonal"
    layers: list[nn.Module] = []
    width = in_features
    for size in hidden_sizes:
        layer = nn.Linear(width, size)
        layers += [_orthogonal(layer, math.sqrt(2)) if orthogonal else layer, ACTIVATIONS[activation]()]
        width = size
    output = nn.Linear(width, out_features)
    layers.append(_orthogonal(output, output_gain) if orthogonal else output)
    return nn.Sequential(*layers)


def _orthogonal(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


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
