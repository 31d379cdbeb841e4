"""Check policy invariance of a reward bonus on a tabular MDP.

Solve the MDP with and without the bonus by value iteration and compare the
optimal policies. A potential-based bonus ``gamma * phi(s') - phi(s)`` must
leave them unchanged (Ng et al., 1999) and shift the optimal action values by
exactly ``-phi(s)``; any other bonus may not.

    >>> import numpy as np
    >>> from rewardlab.shaping.invariance import check_potential
    >>> P = np.zeros((2, 2, 2)); P[:, 0, 0] = 1; P[:, 1, 1] = 1
    >>> R = np.array([[0.0, 1.0], [0.0, 1.0]])
    >>> check_potential(P, R, 0.9, phi=np.array([5.0, -3.0])).policies_agree
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rewardlab.shaping.core import check_gamma


@dataclass
class InvarianceReport:
    """What value iteration found on the shaped and the unshaped MDP.

    :param policies_agree: every state has the same set of optimal actions.
    :param differing_states: the states whose optimal actions changed.
    :param q: optimal action values without the bonus, ``(S, A)``.
    :param q_shaped: optimal action values with the bonus, ``(S, A)``.
    :param q_shift_error: for a potential, ``max |Q_shaped - (Q - phi)|``; else ``None``.
    """

    policies_agree: bool
    differing_states: list[int]
    q: np.ndarray
    q_shaped: np.ndarray
    q_shift_error: float | None = None


def value_iteration(
    P: np.ndarray, R: np.ndarray, gamma: float, terminal: np.ndarray | None = None,
    tol: float = 1e-10, max_iterations: int = 100_000,
) -> np.ndarray:
    """Optimal action values of a tabular MDP.

    :param P: transition probabilities ``(S, A, S)``.
    :param R: rewards ``(S, A)`` or ``(S, A, S)``.
    :param gamma: discount in (0, 1]; with 1 the MDP must end in ``terminal`` states.
    :param terminal: ``(S,)`` bools: absorbing states whose value is 0.
    :return: ``Q`` of shape ``(S, A)``.
    """
    P, R, terminal = _check_mdp(P, R, terminal)
    expected_reward = np.einsum("ijk,ijk->ij", P, R)
    values = np.zeros(P.shape[0])
    for _ in range(max_iterations):
        q = expected_reward + gamma * P @ np.where(terminal, 0.0, values)
        new_values = q.max(1)
        if np.max(np.abs(new_values - values)) < tol:
            return q
        values = new_values
    raise ValueError(
        f"value iteration did not converge in {max_iterations} iterations; with gamma={gamma} "
        "every policy must reach a terminal state"
    )


def greedy_sets(q: np.ndarray, tol: float = 1e-6) -> list[frozenset[int]]:
    """The optimal actions of each state (all actions within ``tol`` of the best)."""
    return [frozenset(np.flatnonzero(row >= row.max() - tol).tolist()) for row in q]


def check_bonus(
    P: np.ndarray, R: np.ndarray, gamma: float, bonus: np.ndarray,
    terminal: np.ndarray | None = None,
) -> InvarianceReport:
    """Whether adding ``bonus`` ``(S, A)`` or ``(S, A, S)`` to ``R`` keeps the optimal policy.

    :param bonus: an arbitrary reward bonus, e.g. +1 for one action.
    """
    gamma = check_gamma(gamma)
    P, R, terminal = _check_mdp(P, R, terminal)
    bonus = np.broadcast_to(bonus if np.ndim(bonus) == 3 else np.asarray(bonus)[..., None], R.shape)
    q = value_iteration(P, R, gamma, terminal)
    q_shaped = value_iteration(P, R + bonus, gamma, terminal)
    plain, shaped = greedy_sets(q), greedy_sets(q_shaped)
    differing = [s for s in range(len(plain)) if plain[s] != shaped[s] and not terminal[s]]
    return InvarianceReport(not differing, differing, q, q_shaped)


def check_potential(
    P: np.ndarray, R: np.ndarray, gamma: float, phi: np.ndarray,
    terminal: np.ndarray | None = None,
) -> InvarianceReport:
    """Whether shaping with the potential ``phi`` ``(S,)`` keeps the optimal policy.

    The bonus is ``gamma * phi(s') - phi(s)`` with ``phi = 0`` at terminal states,
    as the wrappers apply it. Also reports how far ``Q_shaped`` is from ``Q - phi``.
    """
    gamma = check_gamma(gamma)
    P, R, terminal = _check_mdp(P, R, terminal)
    phi = np.asarray(phi, dtype=np.float64)
    if phi.shape != (P.shape[0],):
        raise ValueError(f"phi has shape {phi.shape}; it needs one value per state, ({P.shape[0]},)")
    phi_next = np.where(terminal, 0.0, phi)
    bonus = gamma * phi_next[None, None, :] - phi[:, None, None]
    report = check_bonus(P, R, gamma, bonus, terminal)
    live = ~terminal
    report.q_shift_error = float(
        np.max(np.abs(report.q_shaped[live] - (report.q[live] - phi[live, None])), initial=0.0)
    )
    return report


def _check_mdp(
    P: np.ndarray, R: np.ndarray, terminal: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise ValueError(f"P has shape {P.shape}; it must be (S, A, S)")
    if not np.allclose(P.sum(-1), 1.0):
        raise ValueError("P's rows must sum to 1 over next states: P[s, a].sum() == 1")
    R = np.asarray(R, dtype=np.float64)
    if R.shape == P.shape[:2]:
        R = np.broadcast_to(R[..., None], P.shape)
    if R.shape != P.shape:
        raise ValueError(f"R has shape {R.shape}; it must be (S, A) or (S, A, S) for P {P.shape}")
    terminal = np.zeros(P.shape[0], bool) if terminal is None else np.asarray(terminal, bool)
    if terminal.shape != (P.shape[0],):
        raise ValueError(f"terminal has shape {terminal.shape}; it must be ({P.shape[0]},)")
    return P, R, terminal
