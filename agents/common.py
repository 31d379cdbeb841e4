"""Checks and helpers that every learner in ``agents`` shares."""

from __future__ import annotations

from typing import Any

BATCHED_ATTRIBUTES = ("num_envs", "device", "single_observation_space", "single_action_space", "step", "reset")


def check_batched(env: Any, learner: str, sb3_alternative: str) -> None:
    """Raise ``TypeError`` unless ``env`` follows the batched-env contract.

    :param env: the env given to the learner.
    :param learner: the learner's name, for the message.
    :param sb3_alternative: the SB3 algorithm to use on a plain ``gymnasium.Env`` instead.
    """
    missing = [attr for attr in BATCHED_ATTRIBUTES if not hasattr(env, attr)]
    if missing:
        raise TypeError(
            f"{learner} needs a batched torch env (docs/batched_envs.md); {type(env).__name__} "
            f"has no {', '.join(missing)}. Use envs.make(env_id, num_envs, device, seed), or wrap "
            f"a Gymnasium env in one of envs' adapters; for a plain gymnasium.Env use SB3's "
            f"{sb3_alternative}."
        )


def steps_bar(total: int) -> Any:
    """A tqdm bar over ``total`` env steps."""
    from tqdm import tqdm

    return tqdm(total=total, unit="steps")
