"""Small network builders shared by the agents."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def mlp(
    in_features: int,
    hidden_sizes: Sequence[int],
    out_features: int,
    activation: str = "tanh",
    output_gain: float = 1.0,
) -> nn.Sequential:
    """A multi-layer perceptron with orthogonal initialisation, as in SB3 and CleanRL.

    Hidden layers get gain ``sqrt(2)``, the output layer ``output_gain`` (0.01 for a
    policy head, 1 for a value head); biases start at zero.

    :param in_features: size of the input.
    :param hidden_sizes: width of each hidden layer (may be empty: a linear map).
    :param out_features: size of the output.
    :param activation: ``"tanh"`` or ``"relu"``.
    :param output_gain: orthogonal-init gain of the last layer.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r} is not one of {sorted(ACTIVATIONS)}")
    layers: list[nn.Module] = []
    width = in_features
    for size in hidden_sizes:
        layers += [_orthogonal(nn.Linear(width, size), math.sqrt(2)), ACTIVATIONS[activation]()]
        width = size
    layers.append(_orthogonal(nn.Linear(width, out_features), output_gain))
    return nn.Sequential(*layers)


def _orthogonal(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer
