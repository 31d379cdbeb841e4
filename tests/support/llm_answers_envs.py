"""Reward-code answers in published LLM styles for the envs the first corpus (llm_answers.py)
does not cover: the MiniGrid tasks, each MuJoCo task and behaviour, and a user's own env with
and without a description file.

Written by us after reading the public outputs of Eureka (``@torch.jit.script``, typed
signatures, a dict of components, temperatures as constants), Text2Reward
(``compute_dense_reward`` on one state, numpy, prose around the code) and reflection rounds
(ICPL / Eureka's "revised" answers: an analysis, then in-place edits). MiniGrid's
observation is the agent's 7x7 view flattened to 147 numbers (object, colour, state per
cell; the agent sits at column 3, row 6 of its view, facing row 5; objects: 2 wall, 4 door,
5 key, 8 goal, 9 lava; door state 0 open, 1 closed, 2 locked).

``env_id`` ``USER_DESCRIBED`` is the corridor of tests/support/user_envs.py under its
description file (position, distance_to_goal); ``USER_SPACES`` is the same env described
by its spaces alone (obs, shape (N, 2)).
"""

from __future__ import annotations

from llm_answers import Answer, fenced

USER_DESCRIBED = "user:corridor-described"
USER_SPACES = "user:corridor-spaces"

ENV_ANSWERS = [
    # --------------------------------------------------------------------- MiniGrid
    Answer("minigrid_empty_eureka", fenced('''
import torch
from typing import Dict, Tuple

@torch.jit.script
def compute_reward(next_obs: torch.Tensor, terminated: torch.Tensor, action: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    grid = next_obs.view(-1, 7, 7, 3)
    goal_visible = (grid[..., 0] == 8).any(dim=-1).any(dim=-1).float()
    forward_bonus = (action == 2).float() * 0.01
    success = terminated.float()
    reward = success + 0.1 * goal_visible + forward_bonus
    return reward, {"success": success, "goal_visible": goal_visible, "forward": forward_bonus}
''', "The observation is the agent's 7x7 egocentric view (object, colour, state per cell), so I can "
     "detect the goal (object index 8) in view:"), "trains", env_id="MiniGrid-Empty-5x5-v0"),
    Answer("minigrid_doorkey_text2reward_per_state_numpy", fenced('''
import numpy as np

def compute_dense_reward(obs, next_obs, action, terminated):
    image = np.asarray(next_obs, dtype=np.float32).reshape(7, 7, 3)
    objects = image[..., 0]
    key_seen = float((objects == 5).any())
    door_states = image[..., 2][objects == 4]
    door_open = float(door_states.size > 0 and door_states.min() == 0)
    goal_seen = float((objects == 8).any())
    reward = 0.05 * key_seen + 0.2 * door_open + 0.3 * goal_seen + 10.0 * float(terminated)
    return reward
''', "Text2Reward-style dense reward for DoorKey: find the key, open the door, reach the goal."),
        "trains", env_id="MiniGrid-DoorKey-5x5-v0"),
    Answer("minigrid_fourrooms_reflection", '''Reflection on the last round: `goal_visible` stayed almost
constant (the goal is rarely in view in FourRooms), and the policy turned in place. I add a
penalty for turning and scale the exploration term down.

```python
import torch

def compute_reward(obs, next_obs, action, terminated):
    view = next_obs.reshape(next_obs.shape[0], 7, 7, 3)
    free_ahead = (view[:, 3, 5, 0] == 1).float()
    goal_in_view = (view[..., 0] == 8).flatten(1).amax(dim=-1).float()
    reward = terminated.float() * 10.0
    reward += 0.05 * goal_in_view
    reward -= 0.01 * ((action == 0) | (action == 1)).float()
    return reward, {"goal_in_view": goal_in_view, "free_ahead": free_ahead}
```
''', "trains", env_id="MiniGrid-FourRooms-v0"),
    Answer("minigrid_lavagap_eureka", fenced('''
import torch

def compute_reward(next_obs, action, terminated, env_reward):
    view = next_obs.view(-1, 7, 7, 3)
    lava_ahead = (view[:, 3, 5, 0] == 9).float()
    lava_temperature = 2.0
    caution = -torch.exp(lava_temperature * lava_ahead) / torch.exp(torch.tensor(lava_temperature))
    reached = (env_reward > 0).float()
    reward = 5.0 * reached + 0.1 * caution * (action == 2).float()
    return reward, {"reached": reached, "caution": caution}
''', "Lava is object 9; the cell in front of the agent is column 3, row 5 of its view."),
        "trains", env_id="MiniGrid-LavaGapS5-v0"),
    Answer("minigrid_unlock_per_state_if", fenced('''
import numpy as np

def compute_reward(next_obs, action, terminated):
    image = np.asarray(next_obs).reshape(7, 7, 3)
    door_cells = image[image[..., 0] == 4]
    if terminated:
        return 1.0, {"unlocked": 1.0, "door_in_view": 0.0}
    door_in_view = 1.0 if len(door_cells) > 0 else 0.0
    toggled = 0.05 if action == 5 and door_in_view else 0.0
    return 0.1 * door_in_view + toggled, {"unlocked": 0.0, "door_in_view": door_in_view}
''', "Unlock: the episode ends when the door is opened, so I reward seeing the door and toggling it."),
        "trains", env_id="MiniGrid-Unlock-v0"),
    Answer("minigrid_keycorridor_numpy_batch", fenced('''
import numpy as np
import torch

def compute_reward(next_obs, terminated):
    view = np.asarray(next_obs).reshape(-1, 7, 7, 3)
    objects = view[..., 0]
    key_visible = (objects == 5).any(axis=(1, 2)).astype(np.float32)
    walls = (objects == 2).sum(axis=(1, 2)) / 49.0
    reward = torch.as_tensor(0.1 * key_visible - 0.01 * walls, dtype=torch.float32) + terminated.float()
    return reward, {"key_visible": torch.as_tensor(key_visible), "walls": torch.as_tensor(walls).float()}
'''), "trains", env_id="MiniGrid-KeyCorridorS3R1-v0"),
    Answer("minigrid_invented_positions", fenced('''
import torch

def compute_reward(agent_pos, next_agent_pos, goal_pos):
    before = (agent_pos - goal_pos).abs().sum(dim=-1)
    after = (next_agent_pos - goal_pos).abs().sum(dim=-1)
    return before - after, {"progress": before - after}
'''), "refused", "line 3: argument `agent_pos` of `compute_reward` is not a variable of this environment",
        env_id="MiniGrid-Empty-5x5-v0"),
    Answer("minigrid_indexes_the_flat_view_as_an_image", fenced('''
import torch

def compute_reward(next_obs, terminated):
    objects = next_obs[:, :, 0]
    goal = (objects == 8).float().sum(dim=(1, 2))
    return goal + terminated.float(), {"goal": goal}
'''), "fails", "too many indices", env_id="MiniGrid-DoorKey-5x5-v0"),
    Answer("minigrid_integer_reward", fenced('''
import torch

def compute_reward(next_obs, terminated):
    goal_visible = (next_obs.view(-1, 7, 7, 3)[..., 0] == 8).flatten(1).any(dim=-1)
    reward = torch.where(goal_visible | terminated, 1, 0)
    return reward, {}
'''), "fails", "line 6: the reward returned by `compute_reward` has dtype torch.int64", env_id="MiniGrid-Empty-5x5-v0"),

    # --------------------------------------------------------------------- MuJoCo
    Answer("halfcheetah_eureka", fenced('''
import torch
from typing import Dict, Tuple

@torch.jit.script
def compute_reward(next_x_velocity: torch.Tensor, next_torso_angle: torch.Tensor, action: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    velocity_temperature: float = 0.5
    forward = torch.tanh(velocity_temperature * next_x_velocity)
    control = 0.05 * torch.sum(action ** 2, dim=-1)
    posture = -0.1 * torch.abs(next_torso_angle)
    reward = forward - control + posture
    return reward, {"forward": forward, "control": control, "posture": posture}
''', "Analysing the task: the cheetah should run forward fast without flipping."), "trains", env_id="HalfCheetah-v5"),
    # written for one state (the stack is a vector of two): it runs per env
    Answer("halfcheetah_per_state_stack", fenced('''
import torch

def compute_reward(next_x_velocity, next_torso_angle, next_torso_z):
    posture = torch.stack([next_torso_angle, next_torso_z - 0.6])
    posture_cost = (posture ** 2).sum(dim=-1)
    return next_x_velocity - posture_cost, {"posture_cost": posture_cost}
'''), "trains", env_id="HalfCheetah-v5"),
    Answer("halfcheetah_stacks_on_dim_0", fenced('''
import torch

def compute_reward(next_torso_angle, next_torso_z):
    posture = torch.stack([next_torso_angle, next_torso_z - 0.6])
    posture_cost = (posture ** 2).sum(dim=-1)
    return -posture_cost, {"posture_cost": posture_cost}
'''), "fails", "line 4 stacks values on dim 0", env_id="HalfCheetah-v5"),
    Answer("hopper_text2reward_per_state", fenced('''
import numpy as np

def compute_dense_reward(next_torso_z, next_torso_angle, next_x_velocity, action):
    healthy = 1.0 if next_torso_z > 0.7 and abs(float(next_torso_angle)) < 0.2 else 0.0
    forward = float(next_x_velocity)
    effort = float(np.square(np.asarray(action)).sum())
    return healthy + forward - 1e-3 * effort
''', "Text2Reward style: stay healthy, move forward, small control cost."), "trains", env_id="Hopper-v5"),
    Answer("hopper_names_from_another_framework", fenced('''
import torch

def compute_reward(forward_velocity, torso_height, next_torso_height, action):
    alive = (next_torso_height > 0.7).float()
    return forward_velocity + alive - 0.001 * (action ** 2).sum(dim=-1), {"alive": alive}
'''), "refused", "line 3: argument `torso_height` of `compute_reward` is not a variable of this environment; "
                 "did you mean `torso_z`?", env_id="Hopper-v5"),
    Answer("walker2d_reflection_numpy_methods", '''After the last round the walker fell early (torso_z dropped below
0.8 within 100 steps), so I add an explicit posture term and keep the action cost small.

```python
import numpy as np
import torch

def compute_reward(next_x_velocity, next_torso_z, next_torso_angle, action):
    torques = np.asarray(action)
    effort = (torques.clip(-1.0, 1.0) ** 2).mean(axis=-1)
    posture = np.exp(-np.abs(np.asarray(next_torso_angle)))
    upright = torch.as_tensor(posture, dtype=torch.float32) * (next_torso_z > 0.8).float()
    reward = next_x_velocity + upright - 0.01 * torch.as_tensor(effort, dtype=torch.float32)
    return reward, {"upright": upright}
```
''', "trains", env_id="Walker2d-v5"),
    Answer("walker2d_divides_by_zero", fenced('''
import torch

def compute_reward(next_x_velocity, next_torso_z):
    stability = 1.0 / (next_torso_z - next_torso_z)
    return next_x_velocity + 0.001 * stability, {"stability": stability}
'''), "fails", "line 4: stability = 1.0 / (next_torso_z - next_torso_z)", env_id="Walker2d-v5"),
    Answer("inverted_pendulum_eureka", fenced('''
import torch
from typing import Dict, Tuple

@torch.jit.script
def compute_reward(next_pole_angle: torch.Tensor, next_cart_position: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    angle_temperature: float = 10.0
    upright = torch.exp(-angle_temperature * next_pole_angle ** 2)
    centred = torch.exp(-next_cart_position ** 2)
    return upright + 0.1 * centred, {"upright": upright, "centred": centred}
'''), "trains", env_id="InvertedPendulum-v5"),
    Answer("inverted_pendulum_cartpole_names", fenced('''
import torch

def compute_reward(next_theta, next_x):
    return torch.cos(next_theta) - 0.01 * next_x ** 2, {}
'''), "refused", "line 3: argument `next_theta` of `compute_reward` is not a variable of this environment; "
                 "did you mean `next_pole_angle`?", env_id="InvertedPendulum-v5"),
    Answer("ant_turn_in_place_eureka", fenced('''
import torch

def compute_reward(next_yaw_rate, next_torso_z, next_distance_from_start, action):
    spin_temperature = 1.0
    spin = torch.tanh(spin_temperature * next_yaw_rate)
    healthy = ((next_torso_z > 0.2) & (next_torso_z < 1.0)).float()
    drift = -0.5 * next_distance_from_start
    control = -0.005 * action.pow(2).sum(dim=-1)
    return spin + healthy + drift + control, {"spin": spin, "healthy": healthy, "drift": drift, "control": control}
'''), "trains", env_id="Ant-TurnInPlace-v0"),
    Answer("ant_turn_in_place_heading", fenced('''
import torch

def compute_reward(heading, next_heading, next_torso_z):
    turn = torch.remainder(next_heading - heading + torch.pi, 2 * torch.pi) - torch.pi
    return turn + (next_torso_z > 0.2).float(), {"turn": turn}
'''), "refused", "argument `heading` of `compute_reward` is not a variable of this environment; did you mean "
                 "`torso_yaw`?", env_id="Ant-TurnInPlace-v0"),
    Answer("halfcheetah_backward_text2reward_numpy", fenced('''
import numpy as np

def compute_dense_reward(x, next_x, next_x_velocity, action):
    backward = -np.clip(np.asarray(next_x_velocity), -10.0, 10.0)
    progress = np.asarray(x) - np.asarray(next_x)
    effort = np.square(np.asarray(action)).sum(axis=-1)
    return backward + 10.0 * progress - 0.05 * effort
''', "Text2Reward style for running backwards:"), "trains", env_id="HalfCheetah-Backward-v0"),
    Answer("hopper_backward_two_options", '''Two options; the first is dense.

### Option A (recommended)

```python
import torch

def compute_reward(next_x_velocity, next_torso_z, next_torso_angle):
    healthy = ((next_torso_z > 0.7) & (next_torso_angle.abs() < 0.2)).float()
    backward = -next_x_velocity.clamp(-3.0, 3.0)
    return backward + healthy, {"backward": backward, "healthy": healthy}
```

### Option B (sparse)

```python
def compute_reward(next_x):
    return (next_x <= -2.0).float() / 0.0, {}
```
''', "trains", env_id="Hopper-Backward-v0"),

    # --------------------------------------------------------------------- a user's own env
    Answer("user_described_eureka", fenced('''
import torch

def compute_reward(position, next_position, next_distance_to_goal, terminated):
    progress = next_position - position
    closeness = torch.exp(-0.5 * next_distance_to_goal)
    goal = terminated.float()
    return progress + 0.1 * closeness + goal, {"progress": progress, "closeness": closeness, "goal": goal}
'''), "trains", env_id=USER_DESCRIBED),
    Answer("user_described_invented_names", fenced('''
def compute_reward(agent_position, next_agent_position, goal_distance):
    return next_agent_position - agent_position - 0.01 * goal_distance, {}
'''), "refused", "line 1: argument `agent_position` of `compute_reward` is not a variable of this environment; "
                 "did you mean `position`?", env_id=USER_DESCRIBED),
    Answer("user_spaces_obs_columns", fenced('''
import torch

def compute_reward(obs_0, next_obs_0, next_obs_1, terminated):
    progress = next_obs_0 - obs_0
    remaining = next_obs_1
    return progress - 0.01 * remaining + terminated.float(), {"progress": progress}
''', "From the source, obs_0 is the position and obs_1 the distance to the goal:"), "trains",
        env_id=USER_SPACES),
    Answer("user_spaces_per_state_numpy", fenced('''
import numpy as np

def compute_dense_reward(obs_0, next_obs_0, next_obs_1):
    state = np.array([float(next_obs_0), float(next_obs_1)])
    moved = float(next_obs_0) - float(obs_0)
    return moved + 0.1 * float(state.argmax() == 0)
'''), "trains", env_id=USER_SPACES),
    Answer("user_spaces_whole_observation", fenced('''
import torch

def compute_reward(obs, next_obs):
    return next_obs[:, 0] - obs[:, 0], {}
'''), "refused", "line 3: argument `obs` of `compute_reward` is not a variable of this environment (there is "
                 "no observation array", env_id=USER_SPACES),
    Answer("user_spaces_named_variables", fenced('''
def compute_reward(position, next_position):
    return next_position - position, {}
'''), "refused", "line 1: argument `position` of `compute_reward` is not a variable of this environment",
        env_id=USER_SPACES),
]
