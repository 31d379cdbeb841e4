"""A corpus of reward-code answers in the styles real LLMs write, each with the outcome it must get.

Written by us, after reading the public outputs of Eureka, Text2Reward, ICPL and
stable-eureka: prose around fences, several blocks, ``@torch.jit.script``, typing
signatures, per-state Python with ``if``/``float()``/numpy, in-place idioms, constants as
default arguments; plus unsafe answers that must be refused and buggy ones whose message
must name the line. CartPole-v1 variables: x, x_dot, theta, theta_dot (and next_*),
action, terminated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """One answer and what must happen to it.

    :param name: a short name.
    :param text: the whole reply, as a model sends it.
    :param outcome: ``"trains"`` (checked, runs, finite (N,) rewards), ``"refused"`` (the
        static checks refuse it) or ``"fails"`` (it runs and fails with a message).
    :param expect: for ``refused`` and ``fails``, text the message must hold (a line
        number for ``fails``).
    :param env_id: the env it was written for.
    """

    name: str
    text: str
    outcome: str
    expect: str = ""
    env_id: str = "CartPole-v1"


def fenced(code: str, before: str = "Here is the reward function:", after: str = "") -> str:
    return f"{before}\n\n```python\n{code.strip()}\n```\n\n{after}".strip() + "\n"


STRUCTURED_CODE = """import torch

def compute_reward(next_theta, next_x):
    upright = torch.cos(next_theta)
    centred = 1.0 - torch.abs(next_x) / 2.4
    return upright + 0.5 * centred, {"upright": upright, "centred": centred}
"""

ANSWERS = [
    # ------------------------------------------------------------------ trains
    # structured-output modes (JSON mode, a response schema) return the code as a JSON string
    Answer("structured_output_json", json.dumps({
        "reasoning": "Reward keeping the pole upright and the cart near the centre of the track.",
        "reward_function": STRUCTURED_CODE,
    }), "trains"),
    Answer("structured_output_json_fenced", "```json\n" + json.dumps({
        "reward_function": STRUCTURED_CODE, "components": ["upright", "centred"],
    }, indent=2) + "\n```\n", "trains"),
    # component names written as labels, units and all
    Answer("prose_component_names", fenced('''
import torch

def compute_reward(next_x, next_theta, next_theta_dot):
    position_term = 1.0 - torch.abs(next_x) / 2.4
    angle_term = torch.cos(next_theta)
    spin_term = -0.05 * next_theta_dot ** 2
    reward = position_term + angle_term + spin_term
    return reward, {"cart position (m)": position_term, "pole angle (rad)": angle_term,
                    "angular velocity penalty": spin_term}
'''), "trains"),
    Answer("eureka_jit_typing", fenced('''
import torch
from typing import Tuple, Dict

@torch.jit.script
def compute_reward(next_theta: torch.Tensor, next_x: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    angle_temperature: float = 5.0
    upright = torch.exp(-angle_temperature * torch.abs(next_theta))
    centred = torch.exp(-torch.abs(next_x))
    reward = upright + 0.1 * centred
    return reward, {"upright": upright, "centred": centred}
''', "The reward combines two terms:"), "trains"),
    Answer("our_stub_signature", fenced('''
import torch
from torch import Tensor

def compute_reward(next_theta: Tensor, next_theta_dot: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    balance = 1.0 - (next_theta / 0.2095) ** 2
    calm = -0.01 * next_theta_dot ** 2
    return balance + calm, {"balance": balance, "calm": calm}
'''), "trains"),
    Answer("future_annotations", fenced('''
from __future__ import annotations

import torch

def compute_reward(next_theta: torch.Tensor, terminated: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    alive = 1.0 - terminated.float()
    upright = torch.cos(next_theta)
    return alive * upright, {"alive": alive, "upright": upright}
'''), "trains"),
    Answer("prose_before_and_after", fenced('''
import torch

def compute_reward(next_x, next_theta):
    # keep the pole up and the cart near the middle
    pole = 1.0 - torch.abs(next_theta) / 0.2095
    cart = 1.0 - torch.abs(next_x) / 2.4
    return pole + 0.5 * cart, {"pole": pole, "cart": cart}
''', "Let me think step by step about what the agent must do.\n\n1. The pole must stay upright.\n2. The cart "
         "must not leave the track.", "This reward is dense and bounded, which helps PPO."), "trains"),
    Answer("two_blocks_example_last", '''Reward:

```python
import torch

def compute_reward(next_theta):
    reward = -torch.abs(next_theta)
    return reward, {"angle": reward}
```

Usage inside your training loop:

```python
reward, parts = compute_reward(next_theta=batch["theta"])
```
''', "trains"),
    Answer("helper_in_own_block", '''First a helper:

```python
import torch

def gaussian(value, width):
    return torch.exp(-(value / width) ** 2)
```

Then the reward:

```python
import torch

def gaussian(value, width):
    return torch.exp(-(value / width) ** 2)

def compute_reward(next_theta, next_x):
    upright = gaussian(next_theta, 0.1)
    centred = gaussian(next_x, 1.0)
    return upright * centred, {"upright": upright, "centred": centred}
```
''', "trains"),
    Answer("icpl_in_place", fenced('''
import torch

def compute_reward(next_x_dot, next_theta, action):
    reward = 1.0 - torch.abs(next_theta)
    reward -= 0.05 * torch.abs(next_x_dot)
    action = action.float() * 2 - 1
    action *= 0.5
    effort = -0.01 * action ** 2
    reward += effort
    return reward, {"effort": effort}
'''), "trains"),
    Answer("alias_item_assignment", fenced('''
import torch

def compute_reward(next_theta, terminated):
    reward = next_theta.abs()
    reward[:] = 1.0 - reward
    reward[terminated] = -1.0
    return reward, {"shaped": reward}
'''), "trains"),
    Answer("constant_as_default", fenced('''
import torch

def compute_reward(next_theta, next_x, angle_scale: float = 5.0, position_scale=0.5):
    upright = torch.exp(-angle_scale * next_theta.abs())
    centred = torch.exp(-position_scale * next_x.abs())
    return upright + centred, {"upright": upright, "centred": centred}
'''), "trains"),
    Answer("annotated_locals", fenced('''
import torch

def compute_reward(next_theta, next_theta_dot):
    upright: torch.Tensor = torch.cos(next_theta)
    spin_penalty: torch.Tensor = -0.1 * torch.abs(next_theta_dot)
    total: torch.Tensor = upright + spin_penalty
    return total, {"upright": upright, "spin_penalty": spin_penalty}
'''), "trains"),
    Answer("docstring_and_comments", fenced('''
import torch
import math

def compute_reward(next_theta, next_x):
    """Reward staying balanced.

    Args:
        next_theta: pole angle in radians
        next_x: cart position in metres
    """
    limit = 12 * 2 * math.pi / 360  # the episode ends past 12 degrees
    balance = 1.0 - (next_theta / limit) ** 2  # 1 when upright
    track = 1.0 - (next_x / 2.4) ** 2
    return balance + 0.2 * track, {"balance": balance, "track": track}
'''), "trains"),
    Answer("where_terminal_bonus", fenced('''
import torch

def compute_reward(next_theta, terminated):
    upright = torch.cos(next_theta)
    reward = torch.where(terminated, torch.full_like(upright, -10.0), upright)
    return reward, {"upright": upright, "failure": torch.where(terminated, -10.0, 0.0)}
'''), "trains"),
    Answer("no_grad_decorator", fenced('''
import torch

@torch.no_grad()
def compute_reward(next_theta):
    r = 1.0 - next_theta.abs() * 4
    return r, {"r": r}
'''), "trains"),
    Answer("unfenced_code", '''import torch

def compute_reward(next_theta, next_x):
    reward = 1.0 - torch.abs(next_theta) - 0.1 * torch.abs(next_x)
    return reward, {"reward_terms": reward}
''', "trains"),
    Answer("numpy_on_the_batch", fenced('''
import numpy as np
import torch

def compute_reward(next_theta):
    angle = next_theta.numpy()
    reward = np.cos(angle) - 0.5 * np.abs(angle)
    return torch.as_tensor(reward), {"cosine": torch.as_tensor(np.cos(angle))}
'''), "trains"),
    Answer("numpy_arrays_returned", fenced('''
import numpy as np

def compute_reward(next_theta, next_x):
    upright = np.cos(next_theta.numpy())
    centred = -np.square(next_x.numpy()) / 5.76
    return upright + centred, {"upright": upright, "centred": centred}
'''), "trains"),
    Answer("text2reward_per_state_if", fenced('''
import math

def compute_reward(next_theta, next_x, terminated):
    if terminated:
        return -1.0, {"failure": -1.0}
    angle_reward = math.cos(next_theta)
    if abs(next_x) > 2.0:
        position_reward = -0.5
    else:
        position_reward = 0.0
    return angle_reward + position_reward, {"angle": angle_reward, "position": position_reward}
''', "Since each call handles one state, the reward uses simple conditions."), "trains"),
    Answer("per_state_float_and_min", fenced('''
def compute_reward(next_theta, next_theta_dot):
    angle = float(next_theta)
    speed = float(next_theta_dot)
    reward = max(0.0, 1.0 - abs(angle) * 5) - min(1.0, abs(speed) * 0.1)
    return reward, {"shaped": reward}
'''), "trains"),
    Answer("per_state_numpy_scalars", fenced('''
import numpy as np

def compute_reward(next_theta, next_x):
    theta = float(next_theta)
    reward = np.clip(1.0 - abs(theta) / 0.21, 0.0, 1.0) + 0.1 * np.exp(-abs(float(next_x)))
    return float(reward), {"total": float(reward)}
'''), "trains"),
    Answer("per_state_torch_dot", fenced('''
import torch

def compute_reward(next_theta, next_x, next_theta_dot):
    # one state: a small vector of the pole's angle and the cart's position
    state = torch.stack([next_theta, next_x])
    weights = torch.tensor([1.0, 0.1])
    deviation = torch.dot(weights * state, state)
    reward = torch.exp(-deviation) - 0.01 * torch.abs(next_theta_dot)
    return reward, {"deviation": -deviation}
'''), "trains"),
    Answer("bare_tensor_return", fenced('''
import torch

def compute_reward(next_theta):
    return 1.0 - torch.abs(next_theta)
'''), "trains"),
    Answer("other_function_name", fenced('''
import torch

def cartpole_reward(next_theta, next_x):
    return torch.cos(next_theta) - 0.01 * next_x ** 2, {"main": torch.cos(next_theta)}
'''), "trains"),
    Answer("mountaincar_velocity_energy", fenced('''
import torch
from typing import Dict, Tuple

@torch.jit.script
def compute_reward(next_position: torch.Tensor, next_velocity: torch.Tensor,
                   terminated: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    height = torch.sin(3.0 * next_position)
    energy = 0.5 * next_velocity ** 2 * 100.0 + 0.0025 * height
    goal = terminated.float() * 10.0
    return energy + goal, {"energy": energy, "goal": goal}
'''), "trains", env_id="MountainCar-v0"),
    # ------------------------------------------------------------------ Ant-v5 (MuJoCo)
    Answer("ant_eureka_jit", fenced('''
import torch
from typing import Dict, Tuple

@torch.jit.script
def compute_reward(next_x_velocity: torch.Tensor, next_torso_up: torch.Tensor, action: torch.Tensor,
                   terminated: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    forward_temp: float = 1.0
    forward = torch.tanh(forward_temp * next_x_velocity)
    upright = next_torso_up
    control = -0.05 * torch.sum(action ** 2, dim=-1)
    alive = 1.0 - terminated.float()
    return forward + 0.5 * upright + control + alive, {"forward": forward, "upright": upright,
                                                        "control": control, "alive": alive}
'''), "trains", env_id="Ant-v5"),
    Answer("ant_icpl_in_place", fenced('''
import torch

def compute_reward(next_x_velocity, action, next_torso_z):
    reward = next_x_velocity.clone()
    reward -= 0.5 * (action ** 2).sum(dim=-1)
    height = -torch.abs(next_torso_z - 0.55)
    reward += height
    return reward, {"height": height}
'''), "trains", env_id="Ant-v5"),
    Answer("ant_text2reward_per_state", fenced('''
import numpy as np

def compute_reward(next_x_velocity, next_torso_z, action):
    speed = float(next_x_velocity)
    if next_torso_z < 0.3:
        return -1.0, {"fallen": -1.0}
    effort = float(np.sum(np.square(action.numpy())))
    return speed - 0.1 * effort, {"speed": speed, "effort": -0.1 * effort}
'''), "trains", env_id="Ant-v5"),
    Answer("ant_action_sum_over_batch", fenced('''
import torch

def compute_reward(next_x_velocity, action):
    control = torch.sum(action ** 2)
    return next_x_velocity - 0.1 * control, {"control": control}
'''), "fails", "line 5: component 'control' is a single value", env_id="Ant-v5"),
    Answer("ant_contact_mean_dim0", fenced('''
import torch

def compute_reward(next_x_velocity, foot_1_contact, foot_2_contact):
    contacts = torch.stack([foot_1_contact, foot_2_contact], dim=1)
    grip = contacts.float().mean(dim=0)
    return next_x_velocity + grip, {"grip": grip}
'''), "fails", "line 6", env_id="Ant-v5"),
    # ------------------------------------------------------------------ refused
    Answer("imports_os", fenced('''
import os
import torch

def compute_reward(next_theta):
    os.system("curl http://example.com")
    return next_theta, {}
'''), "refused", "imports `os`"),
    Answer("subprocess_inside", fenced('''
import torch

def compute_reward(next_theta):
    import subprocess
    subprocess.run(["ls"])
    return next_theta, {}
'''), "refused", "imports `subprocess`"),
    Answer("torch_os", fenced('''
import torch

def compute_reward(next_theta):
    torch.os.system("id")
    return next_theta, {}
'''), "refused", "`.os`"),
    Answer("writes_a_file", fenced('''
import torch

def compute_reward(next_theta):
    with open("/tmp/log.txt", "a") as log:
        log.write(str(next_theta))
    return next_theta, {}
'''), "refused", "`open`"),
    Answer("eval_string", fenced('''
import torch

def compute_reward(next_theta):
    return eval("next_theta * 2"), {}
'''), "refused", "`eval`"),
    Answer("dunder_import", fenced('''
import torch

def compute_reward(next_theta):
    __import__("socket").socket()
    return next_theta, {}
'''), "refused", "`__import__`"),
    Answer("class_chain", fenced('''
import torch

def compute_reward(next_theta):
    classes = ().__class__.__bases__[0].__subclasses__()
    return next_theta, {}
'''), "refused", "`.__class__`"),
    Answer("computed_getattr", fenced('''
import torch

def compute_reward(next_theta):
    name = "sys" + "tem"
    getattr(torch, name)
    return next_theta, {}
'''), "refused", "needs a literal attribute name"),
    Answer("undeclared_variable", fenced('''
import torch

def compute_reward(next_theta, velocity):
    return next_theta + velocity, {}
'''), "refused", "argument `velocity`"),
    # ------------------------------------------------------------------ fails, naming the line
    Answer("sums_over_the_batch", fenced('''
import torch

def compute_reward(next_theta):
    upright = torch.cos(next_theta)
    total = torch.sum(upright)
    return total, {"upright": upright}
'''), "fails", "line 6: the reward returned by `compute_reward` is a single value for the whole batch"),
    Answer("component_mean", fenced('''
import torch

def compute_reward(next_theta, next_x):
    upright = torch.cos(next_theta)
    drift = next_x.abs().mean()
    return upright, {"upright": upright, "drift": drift}
'''), "fails", "line 6: component 'drift' is a single value"),
    Answer("shape_mismatch", fenced('''
import torch

def compute_reward(next_theta):
    weights = torch.tensor([1.0, 0.5, 0.25])
    reward = next_theta * weights
    return reward, {}
'''), "fails", "line 5"),
    Answer("bool_reward", fenced('''
import torch

def compute_reward(next_theta):
    ok = next_theta.abs() < 0.1
    return ok, {"ok": ok.float()}
'''), "fails", "line 5: the reward returned by `compute_reward` has dtype torch.bool"),
    Answer("division_by_zero", fenced('''
import torch

def compute_reward(next_theta):
    ratio = next_theta / (next_theta - next_theta)
    return ratio, {}
'''), "fails", "NaN"),
    Answer("typo_name", fenced('''
import torch

def compute_reward(next_theta):
    reward = torch.cos(next_theta)
    return rewrad, {}
'''), "refused", "`rewrad` is not defined"),

    # ------------------------------------------- found in a second pass over real styles
    Answer("per_state_numpy_array_of_inputs", fenced('''
import numpy as np

def compute_dense_reward(next_x, next_x_dot, next_theta, next_theta_dot, action):
    state = np.array([next_x, next_x_dot, next_theta, next_theta_dot])
    weights = np.array([0.1, 0.01, 1.0, 0.05])
    cost = np.sum(weights * np.square(state))
    return 1.0 - cost
''', "Text2Reward-style dense reward (numpy):"), "trains"),
    Answer("example_under_main", fenced('''
import torch

def compute_reward(next_theta, next_x, terminated):
    upright = torch.cos(next_theta)
    fail = -10.0 * terminated.float()
    return upright + fail, {"upright": upright, "fail": fail}

if __name__ == "__main__":
    theta = torch.tensor([0.0, 0.1])
    print(compute_reward(theta, torch.zeros(2), torch.tensor([False, True])))
'''), "trains"),
    Answer("helpers_in_an_earlier_block", '''First a helper:

```python
SCALE = 0.2095

def upright(theta):
    return 1.0 - (theta / SCALE) ** 2
```

And the reward, which uses it:

```python
import torch

def compute_reward(next_theta, next_x):
    keep = upright(next_theta)
    return keep - 0.01 * next_x ** 2, {"upright": keep}
```
''', "trains"),
    Answer("lambda_one_liner", fenced('''
import torch

compute_reward = lambda next_theta, next_x: (torch.cos(next_theta) - 0.05 * next_x ** 2, {"cos": torch.cos(next_theta)})
''', "A compact one-liner works here:"), "trains"),
    Answer("norm_of_a_list_of_inputs", fenced('''
import numpy as np

def compute_reward(next_x, next_theta, next_theta_dot):
    deviation = np.linalg.norm([next_x / 2.4, next_theta / 0.2095])
    velocity_penalty = 0.01 * np.square(next_theta_dot)
    reward = 1.0 - deviation - velocity_penalty
    return reward, {"velocity_penalty": -velocity_penalty}
'''), "fails", "the reward of one env depends on the other envs"),
    Answer("eureka_sum_over_a_one_dimensional_action", fenced('''
import torch
from typing import Dict, Tuple

@torch.jit.script
def compute_reward(next_cos_theta: torch.Tensor, action: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    upright = next_cos_theta
    effort = torch.sum(action ** 2, dim=-1)
    reward = upright - 0.001 * effort
    return reward, {"upright": upright}
'''), "fails", "the reward of one env depends on the other envs", env_id="Pendulum-v1"),
    Answer("normalised_by_the_batch_maximum", fenced('''
import torch

def compute_reward(next_x_dot, next_theta_dot):
    energy = next_x_dot ** 2 + next_theta_dot ** 2
    reward = -energy / (energy.max() + 1e-6)
    return reward, {"energy": reward}
'''), "fails", "the reward of one env depends on the other envs"),
    Answer("numpy_reduction_of_a_tensor", fenced('''
import numpy as np
import torch

def compute_reward(next_x, next_theta):
    penalty = np.sum(torch.stack([next_x, next_theta], dim=-1) ** 2, axis=-1)
    return 1.0 - penalty, {}
'''), "fails", "a numpy reduction such as np.sum"),
    Answer("text2reward_method_signature", fenced('''
import numpy as np

def compute_dense_reward(self, action, obs) -> float:
    x, x_dot, theta, theta_dot = obs
    return 1.0 - abs(theta)
'''), "refused", "drop `self`"),
]
