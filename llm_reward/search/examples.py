"""A small library of (instruction, reward program) examples and TF-IDF retrieval over it.

Text2Reward's few-shot mode shows the LLM the examples whose instructions are most like
the user's. The library ships with rewardlab (:data:`EXAMPLES`, every program passes the
static checks for its env) and retrieval runs locally: a TF-IDF vector per example
(instruction and env id), cosine similarity to the query, nothing downloaded.

    >>> from rewardlab.llm_reward.search.examples import most_similar
    >>> [example.env_id for example in most_similar("swing the pendulum up", "Pendulum-v1", k=2)]
    ['Pendulum-v1', 'Pendulum-v1']
"""

from __future__ import annotations

import math
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["EXAMPLES", "Example", "TfIdfIndex", "most_similar", "tokenize"]


@dataclass(frozen=True)
class Example:
    """One instruction and a reward program written for it.

    :param env_id: the env the program is for.
    :param instruction: the task, as a user would write it.
    :param program: the program's source.
    """

    env_id: str
    instruction: str
    program: str

    @property
    def text(self) -> str:
        """What retrieval compares: the env id and the instruction."""
        return f"{self.env_id} {self.instruction}"


def _example(env_id: str, instruction: str, program: str) -> Example:
    return Example(env_id, instruction, textwrap.dedent(program).strip() + "\n")


EXAMPLES: tuple[Example, ...] = (
    _example("CartPole-v1", "Balance the pole upright for as long as possible.", '''
        import torch


        def compute_reward(next_theta, next_x, terminated):
            upright = 1.0 - (next_theta / 0.2095) ** 2
            centred = 1.0 - (next_x / 2.4) ** 2
            alive = 1.0 - terminated.float()
            reward = alive * (0.7 * upright + 0.3 * centred)
            return reward, {"upright": 0.7 * upright * alive, "centred": 0.3 * centred * alive}
    '''),
    _example("CartPole-v1", "Keep the pole balanced with as little cart motion as possible.", '''
        import torch


        def compute_reward(next_theta, next_x_dot, terminated):
            alive = 1.0 - terminated.float()
            upright = torch.exp(-((next_theta / 0.1) ** 2))
            still = torch.exp(-(next_x_dot**2))
            return alive * (upright + 0.5 * still), {"upright": alive * upright, "still": 0.5 * alive * still}
    '''),
    _example("CartPole-v1", "Balance the pole while keeping the cart near x = 1 on the right.", '''
        import torch


        def compute_reward(next_theta, next_x, terminated):
            alive = 1.0 - terminated.float()
            upright = 1.0 - (next_theta / 0.2095) ** 2
            near_target = torch.exp(-((next_x - 1.0) ** 2) / 0.25)
            return alive * (upright + near_target), {"upright": alive * upright, "target": alive * near_target}
    '''),
    _example("MountainCar-v0", "Drive the car up the right hill and reach the flag as fast as possible.", '''
        import torch


        def energy(position, velocity):
            return 0.5 * velocity**2 + 0.0025 / 3 * torch.sin(3 * position)


        def compute_reward(position, velocity, next_position, next_velocity, terminated):
            step_cost = -torch.ones_like(position)
            gain = 100.0 * (energy(next_position, next_velocity) - energy(position, velocity)) / 0.0017
            goal = 10.0 * terminated.float()
            return step_cost + gain + goal, {"step": step_cost, "energy_gain": gain, "goal": goal}
    '''),
    _example("MountainCar-v0", "Reach the flag while pushing the engine as rarely as possible.", '''
        import torch


        def compute_reward(position, next_position, next_velocity, action, terminated):
            height_gain = torch.sin(3 * next_position) - torch.sin(3 * position)
            momentum = 10.0 * next_velocity.abs()
            push = -0.05 * (action != 1).float()
            goal = 20.0 * terminated.float()
            reward = height_gain + momentum + push + goal
            return reward, {"height": height_gain, "momentum": momentum, "push": push, "goal": goal}
    '''),
    _example("MountainCarContinuous-v0", "Reach the flag on the right hill using little engine force.", '''
        import torch


        def compute_reward(position, velocity, next_position, next_velocity, action, terminated):
            energy = 0.5 * next_velocity**2 + 0.0025 / 3 * torch.sin(3 * next_position)
            old_energy = 0.5 * velocity**2 + 0.0025 / 3 * torch.sin(3 * position)
            gain = 1000.0 * (energy - old_energy)
            force = -0.1 * action**2
            goal = 100.0 * terminated.float()
            return gain + force + goal, {"energy_gain": gain, "force": force, "goal": goal}
    '''),
    _example("Acrobot-v1", "Swing the tip of the acrobot above the line as quickly as possible.", '''
        import torch


        def compute_reward(tip_height, next_tip_height, terminated):
            step_cost = -torch.ones_like(tip_height)
            rise = 5.0 * (next_tip_height - tip_height)
            goal = 10.0 * terminated.float()
            return step_cost + rise + goal, {"step": step_cost, "rise": rise, "goal": goal}
    '''),
    _example("Acrobot-v1", "Keep both acrobot links still, hanging straight down.", '''
        import torch


        def compute_reward(next_theta1, next_theta2, next_theta1_dot, next_theta2_dot):
            hanging = torch.exp(-(next_theta1**2 + next_theta2**2))
            motion = -0.01 * (next_theta1_dot**2 + next_theta2_dot**2)
            return hanging + motion, {"hanging": hanging, "motion": motion}
    '''),
    _example("Pendulum-v1", "Swing the pendulum up and balance it upright.", '''
        import torch


        def compute_reward(next_theta, next_theta_dot, action):
            upright = -(next_theta**2)
            slow = -0.1 * next_theta_dot**2
            effort = -0.001 * torch.clamp(action, -2.0, 2.0) ** 2
            return upright + slow + effort, {"upright": upright, "slow": slow, "effort": effort}
    '''),
    _example("Pendulum-v1", "Spin the pendulum counter-clockwise as fast as possible.", '''
        import torch


        def compute_reward(next_theta_dot, action):
            spin = next_theta_dot / 8.0
            effort = -0.01 * action**2
            return spin + effort, {"spin": spin, "effort": effort}
    '''),
    _example("Pendulum-v1", "Hold the pendulum horizontal, pointing to the right.", '''
        import math

        import torch


        def compute_reward(next_theta, next_theta_dot):
            target = -math.pi / 2
            error = torch.atan2(torch.sin(next_theta - target), torch.cos(next_theta - target))
            close = torch.exp(-(error**2) / 0.1)
            slow = -0.05 * next_theta_dot**2
            return close + slow, {"close": close, "slow": slow}
    '''),
    # MiniGrid's cells are labels: compared with ==, each change paid once each way so no loop pays
    _example("MiniGrid-DoorKey-5x5-v0", "Pick up the key, open the door and reach the goal.", '''
        import torch

        GAMMA = 0.99


        def compute_reward(has_key, next_has_key, door_open, next_door_open, goal_distance,
                           next_goal_distance, terminated, env_reward):
            key = 0.3 * ((next_has_key == 1).float() - (has_key == 1).float())
            door = 0.3 * ((next_door_open == 1).float() - (door_open == 1).float())
            # potential-based, 0 at the end: the step onto the goal hides it
            nearer = 0.1 * (goal_distance - GAMMA * next_goal_distance * (1.0 - terminated.float()))
            return env_reward + key + door + nearer, {"task": env_reward, "key": key, "door": door,
                                                      "nearer": nearer}
    '''),
    _example("MiniGrid-LavaGapS5-v0", "Reach the goal without stepping into the lava.", '''
        import torch


        def compute_reward(front_object, next_front_object, goal_visible, next_goal_visible,
                           env_reward):
            facing_lava = -0.1 * ((next_front_object == 9).float() - (front_object == 9).float())
            sees_goal = 0.2 * ((next_goal_visible == 1).float() - (goal_visible == 1).float())
            return env_reward + facing_lava + sees_goal, {"task": env_reward, "lava": facing_lava,
                                                          "goal": sees_goal}
    '''),
)

_STOP_WORDS = frozenset(
    "a an and as at be by for from in is it its of on or so the to up with while this that "
    "possible much little few".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without stop words; CamelCase and ids are split (``MountainCar-v0``
    gives ``mountain``, ``car``, ``mountaincar``).

    :param text: any text.
    """
    tokens = []
    for word in re.findall(r"[A-Za-z][A-Za-z0-9]*|\d+", text):
        parts = re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", word)
        for token in dict.fromkeys([word.lower(), *(part.lower() for part in parts)]):
            if token not in _STOP_WORDS and len(token) > 1:
                tokens.append(token)
    return tokens


class TfIdfIndex:
    """TF-IDF vectors of some texts, queried by cosine similarity.

    :param texts: the documents.
    """

    def __init__(self, texts: Sequence[str]):
        documents = [Counter(tokenize(text)) for text in texts]
        count = len(documents)
        frequency = Counter(token for document in documents for token in document)
        self._idf = {token: math.log((1 + count) / (1 + df)) + 1.0 for token, df in frequency.items()}
        self._vectors = [self._vector(document) for document in documents]

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        vector = {token: n * self._idf[token] for token, n in counts.items() if token in self._idf}
        norm = math.sqrt(sum(value * value for value in vector.values()))
        return {token: value / norm for token, value in vector.items()} if norm else {}

    def scores(self, query: str) -> list[float]:
        """Cosine similarity of ``query`` to each document, in document order.

        :param query: the text to compare.
        """
        vector = self._vector(Counter(tokenize(query)))
        return [sum(weight * document.get(token, 0.0) for token, weight in vector.items())
                for document in self._vectors]


def most_similar(
    instruction: str, env_id: str, k: int, examples: Sequence[Example] = EXAMPLES
) -> list[Example]:
    """The ``k`` examples most similar to ``instruction`` on ``env_id``, best first.

    Ties keep the library's order; examples with no word in common are left out.

    :param instruction: the user's task.
    :param env_id: the env, part of the query (examples of the same env rank higher).
    :param k: how many to return.
    :param examples: the library.
    """
    if k <= 0:
        return []
    scores = TfIdfIndex([example.text for example in examples]).scores(f"{env_id} {instruction}")
    ranked = sorted(range(len(examples)), key=lambda index: (-scores[index], index))
    return [examples[index] for index in ranked[:k] if scores[index] > 0]
