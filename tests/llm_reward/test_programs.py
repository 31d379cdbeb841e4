"""Reward programs: env descriptions, extraction from LLM answers, checks, loading, the
wrapper, reference programs and sandboxed evaluation (the hostile corpus is in
``test_llm_reward_hostile.py``)."""

from __future__ import annotations

import json
import math
import os

import gymnasium
import numpy as np
import pytest
import torch

from rewardlab import envs, llm_reward
from rewardlab.envs.descriptions import ActionVariable, EnvDescription, StateVariable, column
from rewardlab.llm_reward.programs.answers import extract_code
from rewardlab.llm_reward.programs.checks import CheckError, check_source
from rewardlab.llm_reward.programs.errors import ProgramError
from rewardlab.llm_reward.programs.loading import GymnasiumProgramReward
from rewardlab.llm_reward.programs.program import RewardFunction
from rewardlab.llm_reward.programs.references import SHAPING, registered_reference_programs
from rewardlab.llm_reward.programs.wrapper import ProgramReward
from rewardlab.llm_reward.sandbox.forkserver import ForkServer
from rewardlab.llm_reward.search.budgets import default_budget, learner_discount
from rewardlab.shaping import potentials

SHIPPED = ["CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1", "Pendulum-v1"]
TINY_PPO = {"n_steps": 32, "n_epochs": 2}


def random_actions(env: envs.BatchedEnv) -> torch.Tensor:
    actions = torch.as_tensor(env.action_space.sample())
    return actions.float() if actions.dtype.is_floating_point else actions


def load(source: str, env_id: str = "CartPole-v1") -> RewardFunction:
    return RewardFunction(llm_reward.RewardProgram.from_source(source), llm_reward.describe(env_id))


# --------------------------------------------------------------------- descriptions
@pytest.mark.parametrize("env_id", SHIPPED)
def test_shipped_description_lists_every_variable(env_id: str) -> None:
    description = llm_reward.describe(env_id)
    names = description.state_names
    assert description.variables == (
        *names,
        *(f"next_{n}" for n in names),
        "action",
        "terminated",
        "env_reward",
    )
    prompt = description.to_prompt()
    for name in (*names, "action", "terminated", "env_reward"):
        assert f"    {name}: Tensor" in prompt
    assert "Success metric:" in prompt and env_id in prompt
    compile(prompt + "\n    return x, {}\n", "<prompt>", "exec")  # the prompt is Python


@pytest.mark.parametrize("env_id", SHIPPED)
def test_reward_inputs_are_named_batched_tensors(env_id: str) -> None:
    description = llm_reward.describe(env_id)
    env = envs.make(env_id, num_envs=5, seed=0)
    obs, _ = env.reset()
    actions = random_actions(env)
    next_obs, reward, terminated, _, info = env.step(actions)
    inputs = description.reward_inputs(
        obs, actions, info["final_obs"], terminated, env_reward=reward
    )
    assert list(inputs) == list(description.variables)
    assert torch.equal(inputs["env_reward"], reward.float())
    # without the env's reward (stored transitions), every other input, and a clear error for it
    assert "env_reward" not in description.reward_inputs(
        obs, actions, info["final_obs"], terminated
    )
    with pytest.raises(
        ValueError, match="env_reward, the env's own reward, which is not known here"
    ):
        description.reward_inputs(obs, actions, info["final_obs"], terminated, names=["env_reward"])
    for name, value in inputs.items():
        assert value.shape == (5,), name
    assert torch.equal(inputs["terminated"], terminated)


def test_derived_variables_match_the_observation() -> None:
    obs = torch.tensor([[math.cos(0.3), math.sin(0.3), math.cos(-0.5), math.sin(-0.5), 1.0, 2.0]])
    acrobot = llm_reward.describe("Acrobot-v1").state_tensors(obs)
    assert acrobot["theta1"].item() == pytest.approx(0.3)
    assert acrobot["theta2"].item() == pytest.approx(-0.5)
    assert acrobot["tip_height"].item() == pytest.approx(-math.cos(0.3) - math.cos(-0.2))
    pendulum = llm_reward.describe("Pendulum-v1").state_tensors(torch.tensor([[-1.0, 0.0, 3.0]]))
    assert pendulum["theta"].abs().item() == pytest.approx(math.pi)
    cartpole = llm_reward.describe("CartPole-v1").state_tensors(torch.arange(8.0).reshape(2, 4))
    assert torch.equal(cartpole["theta_dot"], torch.tensor([3.0, 7.0]))


@pytest.mark.filterwarnings("ignore:.*CartPole-v0 is out of date")
def test_generic_description_from_gymnasium_spaces() -> None:
    description = llm_reward.describe("CartPole-v0")  # a Gymnasium id with no batched env
    assert description.state_names == ("obs_0", "obs_1", "obs_2", "obs_3")
    assert "obs_2: Tensor" in description.to_prompt()
    discrete = llm_reward.describe("FrozenLake-v1")
    assert discrete.state_names == ("obs",) and discrete.state[0].dtype == "int64"
    with pytest.raises(ValueError, match="register_description"):
        llm_reward.describe("NoSuchEnv-v0")


def test_register_description_is_what_describe_returns() -> None:
    description = EnvDescription(
        env_id="RegistryProbe-v0",
        summary="a probe.",
        state=(StateVariable("height", "how high", "m", 0.0, 1.0, column(0)),),
        action=ActionVariable("0 or 1"),
        success_metric="the return.",
    )
    llm_reward.register_description(description)
    assert llm_reward.describe("RegistryProbe-v0") is description
    assert "RegistryProbe-v0" in llm_reward.registered_descriptions()
    with pytest.raises(ValueError, match="already registered"):
        llm_reward.register_description(description)
    llm_reward.register_description(description, overwrite=True)
    with pytest.raises(ValueError, match="clashes"):
        EnvDescription("Bad-v0", "", (StateVariable("next_x", ""),), ActionVariable(""), "")


# ------------------------------------------------------------------- LLM answers
REWARD = """def compute_reward(next_theta):
    upright = 1.0 - (next_theta / 0.21) ** 2
    return upright, {"upright": upright}
"""


@pytest.mark.parametrize(
    "answer",
    [
        f"Here it is:\n```python\n{REWARD}```\nHope it helps.",
        f"```\n{REWARD}```",
        f"~~~py\n{REWARD}~~~",
        f"First the helper:\n```python\nimport torch\nX = 1\n```\nthen:\n```python\n{REWARD}```\n"
        'and its output:\n```json\n{"def compute_reward": 1}\n```',
        f"Sure! This reward works.\n\nimport torch\n\n{REWARD}\nThat is all; it rewards being "
        "upright.",
        f"```python\n{REWARD}",  # the answer was cut before the closing fence
        "```python\ndef compute_reward(x):\n    return x, "
        f"{{}}\n```\nBetter:\n```python\n{REWARD}```",
    ],
)
def test_program_found_in_llm_answers(answer: str) -> None:
    program = llm_reward.RewardProgram.from_llm_answer(answer)
    assert program.function_name == "compute_reward"
    assert program.parameters == ("next_theta",)


def test_reward_function_after_helpers_and_under_another_name() -> None:
    helper_first = "def helper(a):\n    return a * 2\n\n\n" + REWARD
    assert llm_reward.RewardProgram.from_source(helper_first).function_name == "compute_reward"
    renamed = llm_reward.RewardProgram.from_source(REWARD.replace("compute_reward", "dense_reward"))
    assert renamed.function_name == "dense_reward"
    two = "def a(x):\n    return x\n\ndef b(x):\n    return x\n"
    with pytest.raises(llm_reward.CheckError, match="none is named `compute_reward`"):
        llm_reward.RewardProgram.from_source(two)
    with pytest.raises(llm_reward.CheckError, match="no Python code"):
        llm_reward.RewardProgram.from_llm_answer("I cannot help with that.")
    assert extract_code("text\n```python\nx = 1\n```\n```python\ndef f(x):\n    return x\n```") == (
        "def f(x):\n    return x\n"
    )


def test_arguments_must_be_declared_variables() -> None:
    program = llm_reward.RewardProgram.from_source(
        "def compute_reward(x, velocity):\n    return x\n"
    )
    with pytest.raises(llm_reward.CheckError) as raised:
        program.check("CartPole-v1")
    wrong, listed = raised.value.findings
    assert wrong.line == listed.line == 1
    assert "`velocity`" in wrong.message and "x, x_dot, theta" in listed.message
    llm_reward.RewardProgram.from_source(
        "def compute_reward(position, velocity):\n    return position\n"
    ).check("MountainCar-v0")


def test_findings_name_the_line_and_the_fix() -> None:
    findings = check_source(
        "import torch\n\ndef compute_reward(x):\n    y = torch.os\n    return open('f')\n"
    )
    messages = {finding.line: finding.message for finding in findings}
    assert "`.os`" in messages[4]
    assert "`open`" in messages[5]
    error = llm_reward.CheckError(findings)
    assert "line 4:" in str(error) and "line 5:" in str(error)


# ------------------------------------------------------------- running a program
def test_reward_function_checks_and_returns_components() -> None:
    function = load(
        "def compute_reward(x, next_x, action):\n    d = next_x - x\n"
        "    return d + action, {'moved': d, 'pushed': action.float()}\n"
    )
    obs, next_obs = torch.zeros(3, 4), torch.ones(3, 4)
    reward, components = function(
        obs, torch.tensor([0, 1, 1]), next_obs, torch.zeros(3, dtype=torch.bool)
    )
    assert torch.equal(reward, torch.tensor([1.0, 2.0, 2.0]))
    assert set(components) == {"moved", "pushed"} and components["moved"].dtype == torch.float32
    bare, components = load("def compute_reward(x):\n    return x * 2\n")(
        obs + 1, torch.zeros(3, dtype=torch.int64), next_obs, torch.zeros(3, dtype=torch.bool)
    )
    assert set(components) == {"reward"} and torch.equal(bare, torch.full((3,), 2.0))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("return x.unsqueeze(1), {}", r"shape \(3, 1\); it must have shape \(3,\)"),
        ("return x > 0, {}", "dtype torch.bool"),
        (
            "return x, {'c': 1.0}",
            r"line 2: component 'c' is one number \(float\) for the whole batch",
        ),
        ("return [x, {}]", "returned a list; it must return \\(reward, components\\)"),
        ("return x / (x - x), {}", "1 NaN and 2 inf of 3"),
        ("raise ValueError('no reward today')", "raised ValueError: no reward today"),
    ],
)
def test_malformed_outputs_fail_with_a_reason(body: str, message: str) -> None:
    function = load(f"def compute_reward(x):\n    {body}\n")
    obs = torch.tensor([[0.0] * 4, [1.0] * 4, [-1.0] * 4])
    with pytest.raises(ProgramError, match=message):
        function(obs, torch.zeros(3, dtype=torch.int64), obs, torch.zeros(3, dtype=torch.bool))


def test_traceback_is_cut_to_the_program() -> None:
    function = load(
        "import torch\n\ndef helper(x):\n    return torch.cat(x)\n\n"
        "def compute_reward(x):\n    return helper(x), {}\n"
    )
    obs = torch.zeros(2, 4)
    with pytest.raises(ProgramError) as raised:
        function(obs, torch.zeros(2, dtype=torch.int64), obs, torch.zeros(2, dtype=torch.bool))
    text = raised.value.traceback
    assert 'File "<reward_program>", line 7, in compute_reward' in text
    assert 'File "<reward_program>", line 4, in helper' in text
    assert "llm_reward" not in text and "TypeError" in text


def test_in_place_work_on_an_input_is_allowed_and_touches_nothing_else() -> None:
    # ICPL's idiom: start from a variable and change it in place; each input is the program's own
    function = load(
        "def compute_reward(x, next_x):\n    y = x\n    y.mul_(2)\n    next_x -= 1\n"
        "    return y + next_x, {}\n"
    )
    obs = torch.ones(2, 4)
    reward, _ = function(
        obs, torch.zeros(2, dtype=torch.int64), obs, torch.zeros(2, dtype=torch.bool)
    )
    assert torch.equal(reward, torch.full((2,), 2.0))
    assert torch.equal(obs, torch.ones(2, 4))  # the env's batch is untouched


def test_wrapper_rewards_true_last_states_and_keeps_extrinsic() -> None:
    function = load(
        "def compute_reward(next_x, terminated):\n"
        "    return next_x, {'next_x': next_x, 'ended': terminated.float()}\n"
    )
    env = ProgramReward(envs.make("CartPole-v1", num_envs=4, seed=0), function)
    env.reset(seed=0)
    push_right = torch.ones(4, dtype=torch.int64)
    for _ in range(200):
        obs, reward, terminated, truncated, info = env.step(push_right)
        components = info["reward_components"]
        assert set(components) == {"extrinsic", "program/next_x", "program/ended"}
        assert torch.equal(components["extrinsic"], torch.ones(4))
        assert torch.equal(reward, info["final_obs"][:, 0])
        if terminated.any():
            break
    assert terminated.any(), "pushing right always ends an episode early"
    ended = terminated.nonzero()[:, 0]
    assert not torch.equal(info["final_obs"][ended], obs[ended])
    assert torch.equal(components["program/ended"], terminated.float())


ENV_REWARD_PROGRAM = (
    "def compute_reward(env_reward, x):\n"
    "    return 2.0 * env_reward - x.abs(), {'own': env_reward}\n"
)


def test_a_program_takes_the_envs_own_reward_in_both_wrappers() -> None:
    # MountainCar pays -1 a step: the program sees it batched and as Gymnasium's float
    program = llm_reward.RewardProgram.from_source(
        "def compute_reward(env_reward, position):\n"
        "    return 2.0 * env_reward + position, {'own': env_reward}\n"
    )
    description = llm_reward.describe("MountainCar-v0")
    batched = ProgramReward(
        envs.make("MountainCar-v0", num_envs=3, seed=0), RewardFunction(program, description)
    )
    obs, _ = batched.reset(seed=0)
    _, reward, _, _, info = batched.step(torch.ones(3, dtype=torch.int64))
    assert torch.equal(info["reward_components"]["program/own"], torch.full((3,), -1.0))
    assert torch.allclose(reward, -2.0 + obs[:, 0])  # position before the step
    single = GymnasiumProgramReward(
        gymnasium.make("MountainCar-v0"), RewardFunction(program, description)
    )
    obs, _ = single.reset(seed=0)
    _, reward, _, _, info = single.step(1)
    assert info["reward_components"]["program/own"] == -1.0
    assert reward == pytest.approx(-2.0 + float(obs[0]))


def test_a_program_on_the_envs_own_reward_trains_in_the_sandbox(tmp_path) -> None:
    program = llm_reward.RewardProgram.from_source(ENV_REWARD_PROGRAM)
    result = llm_reward.evaluate(
        program,
        "CartPole-v1",
        steps=512,
        seeds=(0,),
        timeout_s=90,
        num_envs=4,
        ppo_kwargs=TINY_PPO,
        num_checkpoints=2,
        eval_episodes=2,
    )
    assert result.ok, result.failure
    assert result.curve[-1].components["program/own"] == pytest.approx(1.0)  # CartPole's +1 a step


# ------------------------------------------------------------ reference programs
# The potentials (with the weights) the human reference programs write out as source.
HUMAN_POTENTIALS = {
    "CartPole-v1": lambda: potentials.CartPoleUpright(weight=1.0),
    "MountainCar-v0": lambda: potentials.MountainCarEnergy(weight=100.0, goal_position=0.5),
    "MountainCarContinuous-v0": lambda: potentials.MountainCarEnergy(
        weight=10.0, goal_position=0.45
    ),
    "Acrobot-v1": lambda: potentials.AcrobotTipHeight(weight=10.0),
    "Pendulum-v1": lambda: potentials.PendulumEnergy(weight=5.0),
}


def shaping_of(
    env_id: str, obs: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor
) -> torch.Tensor:
    phi = HUMAN_POTENTIALS[env_id]()
    return 0.99 * phi(next_obs) * (~terminated) - phi(obs)


@pytest.mark.parametrize("env_id", SHIPPED)
def test_reference_programs_reproduce_the_env_and_the_potentials(env_id: str) -> None:
    assert env_id in registered_reference_programs()
    programs = llm_reward.reference_programs(env_id)
    description = llm_reward.describe(env_id)
    for program in programs.values():
        program.check(env_id)
    sparse, human = (RewardFunction(programs[k], description) for k in ("sparse", "human"))
    env = envs.make(env_id, num_envs=16, seed=1)
    obs, _ = env.reset()
    for _ in range(250):
        actions = random_actions(env)
        next_obs, reward, terminated, _, info = env.step(actions)
        final = info["final_obs"]
        sparse_reward, _ = sparse(obs, actions, final, terminated)
        human_reward, parts = human(obs, actions, final, terminated)
        torch.testing.assert_close(sparse_reward, reward, rtol=0, atol=1e-5)
        torch.testing.assert_close(parts["task"], reward, rtol=0, atol=1e-5)
        torch.testing.assert_close(parts["shaping"], shaping_of(env_id, obs, final, terminated))
        torch.testing.assert_close(human_reward, parts["task"] + parts["shaping"])
        obs = next_obs


def telescoping_gaps(env_id: str, written_gamma: float, learner_gamma: float) -> torch.Tensor:
    """Per recorded episode (random actions, 4 envs, each until it has ended once), how far
    the discounted sum of the human reference's shaping, written at ``written_gamma``, is from
    ``learner_gamma**T * phi(s_T) * (not terminated) - phi(s_0)``: what the term telescopes to
    when the learner discounts at ``learner_gamma``."""
    human = RewardFunction(
        llm_reward.reference_programs(env_id, written_gamma)["human"], llm_reward.describe(env_id)
    )
    phi = HUMAN_POTENTIALS[env_id]()
    env = envs.make(env_id, num_envs=4, seed=2)
    env.action_space.seed(2)
    obs, _ = env.reset()
    start, discounted, discount = (
        phi(obs).double(),
        torch.zeros(4, dtype=torch.float64),
        torch.ones(4, dtype=torch.float64),
    )
    gaps, ended = [], torch.zeros(4, dtype=torch.bool)
    while not ended.all():
        actions = random_actions(env)
        next_obs, _, terminated, truncated, info = env.step(actions)
        final = info["final_obs"]
        _, parts = human(obs, actions, final, terminated)
        discounted += discount * parts[SHAPING].double()
        discount *= learner_gamma
        done = terminated | truncated
        expected = discount * phi(final).double() * (~terminated) - start
        gaps.append((discounted - expected)[done].abs())
        ended |= done
        start = torch.where(done, phi(next_obs).double(), start)
        discounted, discount = discounted.masked_fill(done, 0.0), discount.masked_fill(done, 1.0)
        obs = next_obs
    env.close()
    return torch.cat(gaps)


@pytest.mark.parametrize("env_id", sorted(HUMAN_POTENTIALS))
def test_human_shaping_telescopes_at_the_default_budgets_discount(env_id: str) -> None:
    # The learner's config owns gamma: a search candidate trains with its budget's PPO
    # settings (CartPole at 0.98, Pendulum at 0.9), and the reference is written at the
    # discount they give, so its shaping changes no episode's value beyond -phi(s0).
    gamma = learner_discount(default_budget(env_id).ppo_kwargs, SHAPING)
    gaps = telescoping_gaps(env_id, gamma, gamma)
    assert len(gaps) >= 4
    assert gaps.max() < 1e-3 * (1 + HUMAN_POTENTIALS[env_id]().weight)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_human_shaping_written_at_another_discount_does_not_telescope(env_id: str) -> None:
    gamma = learner_discount(default_budget(env_id).ppo_kwargs, SHAPING)
    assert gamma != 0.99  # the budgets this guards: PPO's default discount is not theirs
    assert telescoping_gaps(env_id, 0.99, gamma).max() > 0.05


def test_reference_programs_take_the_learners_discount() -> None:
    source = llm_reward.reference_programs("Pendulum-v1", 0.9)["human"].source
    assert "GAMMA = 0.9\n" in source and "$gamma" not in source
    assert (
        "GAMMA = 0.99\n" in llm_reward.reference_programs("Pendulum-v1")["human"].source
    )  # PPO's default
    with pytest.raises(ValueError, match="gamma must be a number in \\[0, 1\\].*gamma=1.5"):
        llm_reward.reference_programs("Pendulum-v1", 1.5)
    with pytest.raises(ValueError, match="no reference programs"):
        llm_reward.reference_programs("DeepSea-v0")


# --------------------------------------------------------------------- evaluate
def test_evaluate_measures_true_fitness_not_the_program_reward(tmp_path) -> None:
    program = llm_reward.RewardProgram.from_source(
        "import torch\n\ndef compute_reward(x, next_theta):\n"
        "    penalty = torch.full_like(x, -100.0)\n"
        "    upright = -next_theta.abs()\n"
        "    return penalty + upright, {'penalty': penalty, 'upright': upright}\n"
    )
    result = llm_reward.evaluate(
        program,
        "CartPole-v1",
        steps=1024,
        seeds=(0, 1),
        timeout_s=90,
        run_dir=tmp_path / "run",
        num_envs=4,
        ppo_kwargs=TINY_PPO,
        num_checkpoints=4,
        eval_episodes=3,
    )
    assert result.ok, result.failure
    assert result.failure is None and len(result.seeds) == 2
    assert [point.step for point in result.curve] == [256, 512, 768, 1024]
    for point in result.curve:
        assert 8 <= point.fitness <= 500  # true CartPole returns, never -100 per step
        assert point.components["program/penalty"] == pytest.approx(-100.0)
        assert point.components["extrinsic"] == pytest.approx(1.0)
        assert 0.0 <= point.success_rate <= 1.0
    assert result.fitness == pytest.approx(sum(s.checkpoints[-1].fitness for s in result.seeds) / 2)
    assert llm_reward.TrainingRun.from_dict(json.loads(result.to_json())) == result
    run = tmp_path / "run"
    assert json.loads((run / "result.json").read_text())["ok"] is True
    assert (run / "reward_program.py").read_text() == program.source
    assert list((run / "tensorboard").iterdir()), "PPO's TensorBoard logs are in the run folder"
    assert 0 < result.peak_rss_mb < 4096


def test_evaluate_reports_check_failures_without_running() -> None:
    program = llm_reward.RewardProgram(
        "import os\n\ndef compute_reward(x):\n    return x\n", "compute_reward", ("x",)
    )
    result = llm_reward.evaluate(program, "CartPole-v1", steps=64)
    assert not result.ok and result.failure.kind == "check"
    assert result.failure.findings == [
        "line 1: imports `os`; reward programs may only import math, numpy and torch"
    ]
    unknown_argument = llm_reward.RewardProgram.from_source(
        "def compute_reward(speed):\n    return speed\n"
    )
    result = llm_reward.evaluate(unknown_argument, "CartPole-v1", steps=64)
    assert result.failure.kind == "check" and "`speed`" in result.failure.reason


def test_evaluate_rejects_bad_arguments() -> None:
    program = llm_reward.reference_programs("CartPole-v1")["sparse"]
    with pytest.raises(ValueError, match="unknown env 'CartPole-v9': Gymnasium cannot make it"):
        llm_reward.evaluate(program, "CartPole-v9")
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        llm_reward.evaluate(program, "CartPole-v1", steps=0)
    with pytest.raises(ValueError, match="JSON"):
        llm_reward.evaluate(program, "CartPole-v1", ppo_kwargs={"net_arch": object()})
    with pytest.raises(
        TypeError, match="RewardProgram"
    ):  # a program, or its source (read in a child)
        llm_reward.evaluate(42, "CartPole-v1")  # type: ignore[arg-type]


def test_evaluate_without_a_run_dir() -> None:
    program = llm_reward.reference_programs("Pendulum-v1")["human"]
    result = llm_reward.evaluate(
        program,
        "Pendulum-v1",
        steps=128,
        num_envs=4,
        ppo_kwargs=TINY_PPO,
        num_checkpoints=1,
        eval_episodes=2,
        timeout_s=120,
    )
    assert result.ok, result.failure
    assert result.run_dir is None and result.success_rate is None
    (point,) = result.curve
    assert -2000 < point.fitness <= 0 and set(point.components) == {
        "extrinsic",
        "program/task",
        "program/shaping",
    }
    assert point.components["program/task"] == pytest.approx(
        point.components["extrinsic"], abs=1e-5
    )


def test_fork_server_starts_with_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARDLAB_TEST_TOKEN", "do-not-leak")
    server = ForkServer(())
    try:
        with open(f"/proc/{server.process.pid}/environ", "rb") as environ:
            names = {entry.split(b"=", 1)[0] for entry in environ.read().split(b"\0") if entry}
        assert b"REWARDLAB_TEST_TOKEN" not in names and b"PYTHONPATH" in names
        assert server.alive()
    finally:
        server.close()
    assert not server.alive() and not os.path.exists(server.socket_path)


def test_an_answer_without_fences_costs_a_bounded_number_of_parses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # red-team finding: one parse per line of an unfenced answer whose prefixes never parse
    # held the search's own process for a long while on a 110 KB answer
    from rewardlab.llm_reward.programs import answers

    parsed = []
    real = answers.parse_source
    monkeypatch.setattr(
        answers, "parse_source", lambda source: parsed.append(len(source)) or real(source)
    )
    answer = "def compute_reward(x):\n    y = (\n" + "    x + 1,\n" * 5000
    with pytest.raises(CheckError):
        llm_reward.RewardProgram.from_llm_answer(answer)
    assert 0 < sum(parsed) <= answers.MAX_UNFENCED_PARSED_CHARS
    # the usual unfenced answer, code then prose, is still found
    found = llm_reward.RewardProgram.from_llm_answer(
        "Sure:\ndef compute_reward(theta):\n    return -theta.abs(), {}\nThis keeps the pole up.\n"
    )
    assert found.parameters == ("theta",)


def test_component_names_become_what_reports_take_and_huge_values_fail() -> None:
    # red-team finding: a name with a space (or past 56 characters) passed the program's
    # checks, trained to the end, and the caller then refused the whole result
    description = llm_reward.describe("CartPole-v1")
    long_name = "upright_bonus_for_keeping_the_pole_close_to_vertical_position"
    program = llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\n"
        f"    return -next_theta.abs(), {{'speed bonus': next_theta, {long_name!r}: next_theta}}\n"
    )
    function = RewardFunction(program, description)
    states = torch.zeros((4, 4))
    _, components = function(
        states, torch.zeros(4, dtype=torch.int64), states, torch.zeros(4, dtype=torch.bool)
    )
    assert list(components) == ["speed_bonus", long_name[:56]]
    clash = llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\n    return next_theta, "
        "{'a b': next_theta, 'a-b c': next_theta, 'a_b': next_theta}\n"
    )
    with pytest.raises(ProgramError, match="both become 'a_b'"):
        RewardFunction(clash, description)(
            states, torch.zeros(4, dtype=torch.int64), states, torch.zeros(4, dtype=torch.bool)
        )
    # finite float32 values near the largest overflowed the job's float32 means to inf
    huge = llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\n    return next_theta + 3.0e38, {}\n"
    )
    with pytest.raises(ProgramError, match="magnitude 3e"):
        RewardFunction(huge, description)(
            states, torch.zeros(4, dtype=torch.int64), states, torch.zeros(4, dtype=torch.bool)
        )


# ------------------------------------------- numpy's and torch's own API inside a program
# Each public method of numpy's ndarray, called on `a`: the values of every env as a row
# (shape (N, 4) on a batch, (4,) for one state), giving one number per env.
NDARRAY_METHOD_CALLS = {
    "all": "(a > -10).all(axis=-1)",
    "any": "(a > 0).any(axis=-1)",
    "argmax": "a.argmax(axis=-1)",
    "argmin": "a.argmin(axis=-1)",
    "argpartition": "a.argpartition(1, axis=-1)[..., 0]",
    "argsort": "a.argsort(axis=-1)[..., 0]",
    "astype": "a.astype(np.float32)[..., 0]",
    "byteswap": "a.byteswap().byteswap()[..., 0]",
    "choose": "(a > 0).astype(np.int64).choose([a * 0.0, a]).sum(axis=-1)",
    "clip": "a.clip(-0.5, 0.5).sum(axis=-1)",
    "compress": "a.compress([True, False, True, False], axis=-1).sum(axis=-1)",
    "conj": "a.conj()[..., 0]",
    "conjugate": "a.conjugate()[..., 1]",
    "copy": "a.copy()[..., 2]",
    "cumprod": "a.cumprod(axis=-1)[..., -1]",
    "cumsum": "a.cumsum(axis=-1)[..., -1]",
    "diagonal": "a[..., None, :].repeat(4, axis=-2).diagonal(axis1=-2, axis2=-1).sum(axis=-1)",
    "dot": "a.dot(np.array([1.0, 2.0, 3.0, 4.0]))",
    "dumps": "per_row(a, lambda row: len(row.dumps()) > 0)",
    "fill": "filled(a)",
    "flatten": "a.flatten().reshape(a.shape)[..., 3]",
    "getfield": "a.getfield(np.float64)[..., 0]",
    "item": "per_row(a, lambda row: row.item(1))",
    "max": "a.max(axis=-1)",
    "mean": "a.mean(axis=-1)",
    "min": "a.min(axis=-1)",
    "nonzero": "per_row(a, lambda row: len((row > 0).nonzero()[0]))",
    "partition": "partitioned(a)",
    "prod": "a.prod(axis=-1)",
    "put": "per_row(a, put_first)",
    "ravel": "a.ravel().reshape(a.shape)[..., 1]",
    "repeat": "a.repeat(2, axis=-1).sum(axis=-1)",
    "reshape": "a.reshape(*a.shape[:-1], 2, 2)[..., 1, 1]",
    "resize": "per_row(a, resized)",
    "round": "a.round(1)[..., 0]",
    "searchsorted": "per_row(a, lambda row: np.sort(row).searchsorted(0.0))",
    "setfield": "with_field(a)",
    "setflags": "read_only(a)",
    "sort": "sorted_in_place(a)",
    "squeeze": "a[..., None].squeeze(-1)[..., 0]",
    "std": "a.std(axis=-1)",
    "sum": "a.sum(axis=-1)",
    "swapaxes": "a[..., None].swapaxes(-1, -2)[..., 0, 0]",
    "take": "a.take(2, axis=-1)",
    "to_device": "a.to_device('cpu')[..., 0]",
    "tobytes": "per_row(a, lambda row: len(row.tobytes()))",
    "tolist": "per_row(a, lambda row: sum(row.tolist()))",
    "trace": "per_row(a, lambda row: np.diag(row).trace())",
    "transpose": "a.transpose()[0]",
    "var": "a.var(axis=-1)",
    "view": "a.view(np.float64)[..., 0]",
    # attributes
    "T": "a.T[0]",
    "mT": "a[..., None].mT[..., 0, 0]",
    "real": "a.real[..., 0]",
    "imag": "a.imag[..., 0]",
    "flat": "per_row(a, lambda row: row.flat[2])",
    "shape": "a[..., 0] * a.shape[-1]",
    "size": "a[..., 0] * 0 + a.size / max(a.size, 1)",
    "ndim": "a[..., 0] * 0 + (a.ndim >= 1)",
    "nbytes": "a[..., 0] * 0 + (a.nbytes > 0)",
    "itemsize": "a[..., 0] * 0 + a.itemsize",
    "dtype": "a.astype(a.dtype)[..., 0]",
    "strides": "a[..., 0] * 0 + (a.strides[-1] == a.itemsize)",
    "base": "a[..., 0] * 0 + (a.copy().base is None)",
    "flags": "a[..., 0] * 0 + a.flags.writeable",
    "device": "a[..., 0] * 0 + (a.device == 'cpu')",
    "data": "a[..., 0] * 0 + (a.data is not None)",
}
# ndarray methods that write files or reach native code, which programs may not do
REFUSED_NDARRAY = {"dump": "writes a file", "tofile": "writes a file", "ctypes": "native code"}
NUMPY_FUNCTION_CALLS = [
    "np.max(a, axis=-1)",
    "np.amax(a, axis=-1)",
    "np.min(a, axis=-1)",
    "np.sum(a, axis=-1)",
    "np.mean(a, axis=-1)",
    "np.std(a, axis=-1)",
    "np.var(a, axis=-1)",
    "np.median(a, axis=-1)",
    "np.percentile(a, 75, axis=-1)",
    "np.quantile(a, 0.25, axis=-1)",
    "np.average(a, axis=-1, weights=[1.0, 2.0, 3.0, 4.0])",
    "np.ptp(a, axis=-1)",
    "np.nanmean(a, axis=-1)",
    "np.nansum(a, axis=-1)",
    "np.nanmax(a, axis=-1)",
    "np.argmax(a, axis=-1)",
    "np.cumsum(a, axis=-1)[..., -1]",
    "np.prod(a, axis=-1)",
    "np.linalg.norm(a, axis=-1)",
    "np.sort(a, axis=-1)[..., 0]",
    "np.argsort(a, axis=-1)[..., -1]",
    "np.partition(a, 2, axis=-1)[..., 2]",
    "per_row(a, lambda row: len(np.unique(np.round(row))))",
    "np.where(a > 0, a, 0.0).sum(axis=-1)",
    "np.take_along_axis(a, np.argsort(a, axis=-1), axis=-1)[..., 0]",
    "np.take(a, 1, axis=-1)",
    "a[..., [0, 2]].sum(axis=-1)",
    "a[..., 1:3].sum(axis=-1)",
    "(a * (a > 0)).sum(axis=-1)",
    "np.clip(a, -1, 1).sum(axis=-1)",
    "np.abs(a).sum(axis=-1)",
    "np.exp(-np.square(a)).sum(axis=-1)",
    "np.log1p(np.abs(a)).sum(axis=-1)",
    "np.tanh(a).sum(axis=-1)",
    "np.hypot(a[..., 0], a[..., 1])",
    "np.arctan2(a[..., 0], a[..., 1] + 2.0)",
    "np.einsum('...i,i->...', a, np.arange(4.0))",
    "np.dot(a, np.ones(4))",
    "a @ np.ones(4)",
    "np.diff(a, axis=-1).sum(axis=-1)",
    "np.count_nonzero(a > 0, axis=-1)",
    "np.sign(a).sum(axis=-1)",
    "np.maximum(a, 0).sum(axis=-1)",
    "np.logical_and(a > -1, a < 1).sum(axis=-1)",
    "np.isclose(a, 0.0).sum(axis=-1)",
    "np.interp(a[..., 0], [-1.0, 1.0], [0.0, 1.0])",
    "np.cos(a).mean(axis=-1)",
    # random numbers are drawn and weighted by 0: a reward must not depend on them
    "0.0 * np.random.default_rng(0).normal(size=a.shape).sum(axis=-1)",
    "0.0 * np.random.default_rng(1).uniform(size=a.shape[:-1])",
    "0.0 * np.random.default_rng(2).integers(0, 4, size=a.shape[:-1])",
    "0.0 * np.random.default_rng(3).permutation(4).sum()",
    "0.0 * np.random.rand(*a.shape[:-1])",
    "0.0 * np.random.normal(size=a.shape[:-1])",
]
TORCH_CALLS = [
    "s.sum(dim=-1)",
    "s.mean(dim=-1)",
    "s.std(dim=-1)",
    "s.var(dim=-1)",
    "s.amax(dim=-1)",
    "s.amin(dim=-1)",
    "s.max(dim=-1).values",
    "s.min(dim=-1).values",
    "s.prod(dim=-1)",
    "torch.linalg.vector_norm(s, dim=-1)",
    "s.norm(dim=-1)",
    "torch.logsumexp(s, dim=-1)",
    "s.median(dim=-1).values",
    "torch.quantile(s, 0.5, dim=-1)",
    "s.nanmean(dim=-1)",
    "s.cumsum(dim=-1)[..., -1]",
    "s.cumprod(dim=-1)[..., -1]",
    "s.argmax(dim=-1).float()",
    "s.argmin(dim=-1).float()",
    "(s > 0).any(dim=-1).float()",
    "(s > -10).all(dim=-1).float()",
    "torch.count_nonzero(s > 0, dim=-1).float()",
    "s.sort(dim=-1).values[..., 0]",
    "torch.sort(s, dim=-1, descending=True).values[..., 0]",
    "s.argsort(dim=-1)[..., 0].float()",
    "s.topk(2, dim=-1).values.sum(dim=-1)",
    "s.kthvalue(2, dim=-1).values",
    "s.gather(-1, s.argmax(dim=-1, keepdim=True))[..., 0]",
    "s.index_select(-1, torch.tensor([0, 2])).sum(dim=-1)",
    "torch.take_along_dim(s, s.argsort(dim=-1), dim=-1)[..., 0]",
    "torch.where(s > 0, s, -s).sum(dim=-1)",
    "s.masked_fill(s < 0, 0.0).sum(dim=-1)",
    "s[..., [0, 2]].sum(dim=-1)",
    "s[..., 1:3].sum(dim=-1)",
    "torch.zeros_like(s).scatter(-1, s.argmin(dim=-1, keepdim=True), 1.0).sum(dim=-1)",
    "s.clamp(-1, 1).sum(dim=-1)",
    "torch.tanh(s).sum(dim=-1)",
    "torch.sigmoid(s).sum(dim=-1)",
    "torch.nn.functional.softplus(s).sum(dim=-1)",
    "torch.atan2(s[..., 0], s[..., 1] + 2.0)",
    "torch.hypot(s[..., 0], s[..., 1])",
    "torch.einsum('...i,i->...', s, torch.arange(4.0))",
    "torch.cat([s, s], dim=-1).sum(dim=-1)",
    "torch.exp(-s.square()).sum(dim=-1)",
    "0.0 * torch.rand_like(s).sum(dim=-1)",
    "0.0 * torch.randn_like(s).sum(dim=-1)",
    "0.0 * torch.randint_like(s, 0, 4).sum(dim=-1)",
    "0.0 * torch.bernoulli(torch.full_like(s, 0.5)).sum(dim=-1)",
    "0.0 * torch.multinomial(torch.ones_like(s), 1).float()[..., 0]",
    "0.0 * torch.randperm(4).float().sum()",
]
LIBRARY_HELPERS = """
import numpy as np
import torch


def per_row(values, function):
    rows = values.reshape(-1, values.shape[-1])
    return np.array([function(row) for row in rows], dtype=np.float64).reshape(values.shape[:-1])


def filled(a):
    b = a.copy()
    b.fill(2.0)
    return b[..., 0]


def partitioned(a):
    b = a.copy()
    b.partition(1, axis=-1)
    return b[..., 1]


def sorted_in_place(a):
    b = a.copy()
    b.sort(axis=-1)
    return b[..., 0]


def put_first(row):
    b = row.copy()
    b.put([0], [5.0])
    return b.sum()


def resized(row):
    b = row.copy()
    b.resize((8,), refcheck=False)
    return b.sum()


def with_field(a):
    b = a.copy()
    b.setfield(1.0, np.float64)
    return b[..., 0]


def read_only(a):
    b = a.copy()
    b.setflags(write=False)
    return b[..., 0]
"""


def library_program(per_state: bool) -> str:
    """A program calling every ndarray method and the common numpy and torch functions; with
    ``per_state``, it is written for one state (``if terminated``), so it runs per env."""
    numpy_terms = [call for name, call in NDARRAY_METHOD_CALLS.items() if hasattr(np.ndarray, name)]
    numpy_terms += NUMPY_FUNCTION_CALLS
    lines = [
        LIBRARY_HELPERS,
        "",
        "def compute_reward(next_x, next_x_dot, next_theta, next_theta_dot, terminated):",
    ]
    if per_state:
        lines.append("    done = 1.0 if terminated else 0.0")
    else:
        lines.append("    done = terminated.double().numpy()")
    lines += [
        "    a = np.stack([np.asarray(v, dtype=np.float64) for v in (next_x, next_x_dot, "
        "next_theta, next_theta_dot)], axis=-1)",
        "    s = torch.as_tensor(a, dtype=torch.float32)",
        "    numpy_terms = [",
        *(f"        {call}," for call in numpy_terms),
        "    ]",
        "    torch_terms = [",
        *(f"        {call}," for call in TORCH_CALLS),
        "    ]",
        "    numpy_total = sum(np.asarray(term, dtype=np.float64) for term in numpy_terms)",
        "    torch_total = sum(term.double() for term in torch_terms)",
        "    reward = torch.as_tensor(np.tanh(numpy_total / 1000.0)) + torch.tanh(torch_total / "
        "1000.0) - done",
        "    return reward.float(), "
        "{'numpy': torch.as_tensor(numpy_total).float(), 'torch': torch_total.float()}",
    ]
    return "\n".join(lines) + "\n"


def test_every_ndarray_method_is_in_the_library_program() -> None:
    public = {name for name in dir(np.ndarray) if not name.startswith("_")}
    assert public <= set(NDARRAY_METHOD_CALLS) | set(REFUSED_NDARRAY), public - set(
        NDARRAY_METHOD_CALLS
    )
    for name, why in REFUSED_NDARRAY.items():
        findings = check_source(f"def compute_reward(x):\n    return x.{name}, {{}}\n")
        assert findings and "line 2" in str(findings[0]), (name, why)


def test_numpy_and_torch_run_inside_a_program_on_a_batch_and_per_state() -> None:
    """numpy's array methods import numpy's internals lazily through the calling frame's
    __import__ (the program's): they refused with "'_core' is a private attribute" before."""
    description = llm_reward.describe("CartPole-v1")
    generator = torch.Generator().manual_seed(0)
    obs, next_obs = torch.randn((2, 6, 4), generator=generator)
    terminated = torch.tensor([False, True, False, False, True, False])
    actions = torch.zeros(6, dtype=torch.int64)
    batched = RewardFunction(
        llm_reward.RewardProgram.from_source(library_program(False)), description
    )
    per_state = RewardFunction(
        llm_reward.RewardProgram.from_source(library_program(True)), description
    )
    reward, parts = batched(obs, actions, next_obs, terminated)
    assert not batched.per_state
    alone, alone_parts = per_state(obs, actions, next_obs, terminated)
    assert per_state.per_state and per_state.per_state_mode == "loop"
    torch.testing.assert_close(alone, reward)
    torch.testing.assert_close(alone_parts["numpy"], parts["numpy"], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(alone_parts["torch"], parts["torch"], rtol=1e-5, atol=1e-4)
    # the restricted namespace computes what plain Python does with the same source
    namespace: dict = {}
    exec(library_program(False), namespace)
    inputs = description.reward_inputs(obs, actions, next_obs, terminated)
    expected, _ = namespace["compute_reward"](
        **{name: inputs[name] for name in batched.program.parameters}
    )
    torch.testing.assert_close(reward, expected.float())
    one = RewardFunction(llm_reward.RewardProgram.from_source(library_program(True)), description)
    first, _ = one(obs[:1], actions[:1], next_obs[:1], terminated[:1])
    torch.testing.assert_close(first, reward[:1])


@pytest.mark.parametrize("per_state", [False, True], ids=["batch", "per_state"])
def test_numpy_and_torch_run_inside_a_sandboxed_program(per_state: bool) -> None:
    program = llm_reward.RewardProgram.from_source(library_program(per_state))
    result = llm_reward.evaluate(
        program,
        "CartPole-v1",
        steps=128,
        num_envs=4,
        ppo_kwargs=TINY_PPO,
        num_checkpoints=1,
        eval_episodes=1,
        timeout_s=120,
    )
    assert result.ok, result.failure
    assert {"program/numpy", "program/torch"} <= set(result.curve[-1].components)


def test_a_program_import_statement_stays_restricted() -> None:
    description = llm_reward.describe("CartPole-v1")
    # past the static checks (as a program that got around them would be), the import
    # statement itself is refused at run time, while numpy's own imports work
    program = llm_reward.RewardProgram(
        "def compute_reward(next_x):\n    import numpy._core._methods\n    return next_x, {}\n",
        "compute_reward",
        ("next_x",),
    )
    states = torch.zeros((2, 4))
    with pytest.raises(ProgramError) as error:
        RewardFunction(program, description)(
            states, torch.zeros(2, dtype=torch.int64), states, torch.zeros(2, dtype=torch.bool)
        )
    assert "`_core` is a private" in error.value.reason and "failed too" not in error.value.reason
    assert "line 2, in compute_reward" in error.value.traceback


# ------------------------------------------------------- hostile answers, parsed quickly
def test_an_answer_past_the_cap_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewardlab.llm_reward.programs import answers

    parsed = []
    real = answers.parse_source
    monkeypatch.setattr(answers, "parse_source", lambda source: parsed.append(1) or real(source))
    answer = "```python\ndef compute_reward(x):\n    return x, {}\n```\n" + "`" * 1_000_000
    with pytest.raises(
        CheckError, match=r"the answer has 1,000,054 characters, and at most 200,000 are read"
    ):
        llm_reward.RewardProgram.from_llm_answer(answer)
    assert parsed == []


@pytest.mark.parametrize(
    "answer",
    [
        "```python\n" + "`" * 100_000,  # an unterminated fence of backticks (quadratic in a regex)
        "```\n" + "```python\n" * 15_000,  # fences opening fences, none closed
        "~~~~\n" + "~~~ python\nx = 1\n" * 10_000,
        "def compute_reward(x):\n    y = (\n" + "    x + 1,\n" * 15_000,  # unfenced, never parses
    ],
    ids=["backticks", "fences", "tildes", "unfenced"],
)
def test_hostile_fences_fail_as_candidates(answer: str) -> None:
    with pytest.raises(CheckError):
        llm_reward.RewardProgram.from_llm_answer(answer)


def test_an_unterminated_fence_runs_to_the_end() -> None:
    program = llm_reward.RewardProgram.from_llm_answer(
        "Here:\n```python\ndef compute_reward(next_theta):\n    return -next_theta.abs(), {}\n"
    )
    assert program.parameters == ("next_theta",)


def test_helpers_in_many_blocks_are_each_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """600 helpers in 600 blocks were parsed once per helper (quadratic in the helpers)."""
    from rewardlab.llm_reward.programs import answers

    parsed = []
    real = answers.parse_source
    monkeypatch.setattr(answers, "parse_source", lambda source: parsed.append(1) or real(source))
    helpers = "".join(
        f"```python\ndef h{i}(x):\n    return h{i + 1}(x) + 1\n```\n" for i in range(600)
    )
    answer = (
        helpers
        + ("```python\ndef h600(x):\n    return x\n```\n"
           "```python\ndef compute_reward(x):\n    return h0(x), {}\n```\n")
    )
    source = extract_code(answer)
    assert source.count("def h") == 601 and source.startswith("def compute_reward(x):")
    assert len(parsed) <= 602  # the picked block and each other block once


def test_a_deep_chain_is_a_check_failure_everywhere(tmp_path) -> None:
    """A 700-deep decorator chain passes ast.parse and overflows ast.unparse: it ended the
    search."""
    from rewardlab.llm_reward.programs.normalize import normalize_source

    deep = (
        "@"
        + ".".join(["torch"] * 700)
        + "\ndef compute_reward(next_theta):\n    return next_theta, {}\n"
    )
    assert normalize_source(deep).source == deep
    with pytest.raises(
        CheckError, match="line 1: the program nests expressions more than 100 levels deep"
    ):
        llm_reward.RewardProgram.from_llm_answer(f"```python\n{deep}```\n")
    attribute = "def compute_reward(next_theta):\n    return next_theta" + ".real" * 700 + ", {}\n"
    assert "line 2: the program nests" in str(check_source(attribute)[0])
    path = tmp_path / "best_reward.py"
    path.write_text("# rewardlab-env: CartPole-v1\n" + deep)
    with pytest.raises(CheckError, match="nests expressions"):
        llm_reward.load_reward(path)
    result = llm_reward.evaluate(
        llm_reward.RewardProgram(deep, "compute_reward", ("next_theta",)), "CartPole-v1", steps=64
    )
    assert (
        not result.ok
        and result.failure.kind == "check"
        and "nests expressions" in result.failure.reason
    )


@pytest.mark.parametrize("character", ["\x1b", "\x07", "\x00", "\x9b", "\u202e"])
def test_control_characters_in_source_are_refused(character: str) -> None:
    source = (f"def compute_reward(next_theta):\n    label = 'a{character}]0;title'\n    return "
              "next_theta, {}\n")
    with pytest.raises(CheckError) as error:
        llm_reward.RewardProgram.from_source(source)
    assert f"line 2: the program holds the control character U+{ord(character):04X}" in str(
        error.value
    )
    # tabs and Windows line ends are text
    llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\r\n\treturn next_theta, {}\r\n"
    )


def test_both_causes_of_a_per_state_failure_are_reported() -> None:
    """The batch call and the call with one env's values fail differently: both are said."""
    program = llm_reward.RewardProgram.from_source(
        "import math\nimport torch\n\ndef compute_reward(next_x, next_theta):\n"
        "    pair = torch.stack([next_x, next_theta])\n"
        "    reward = torch.dot(pair, torch.tensor([1.0, 2.0]))\n"
        "    return reward, {'log': math.log(-1.0)}\n"
    )
    states = torch.zeros((3, 4))
    with pytest.raises(ProgramError) as error:
        RewardFunction(program, llm_reward.describe("CartPole-v1"))(
            states, torch.zeros(3, dtype=torch.int64), states, torch.zeros(3, dtype=torch.bool)
        )
    reason = error.value.reason
    assert (
        "1D tensors expected" in reason
        and "called with env 0's values alone, it failed too" in reason
    )
    assert "math domain error" in reason
    assert "line 6" in error.value.traceback and "line 7" in error.value.traceback


def test_a_reward_files_header_never_imports_a_module(tmp_path, monkeypatch, capsys) -> None:
    """A shared run folder: a helper module beside best_reward.py, named by its header, never
    runs."""
    import sys

    from rewardlab.app.cli import main

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "helper_ran"
    (tmp_path / "helper_env_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    path = tmp_path / "best_reward.py"
    path.write_text(
        "# rewardlab-env: helper_env_module:Helper-v0\n"
        "def compute_reward(next_theta):\n    return next_theta, {}\n"
    )
    import_path = list(sys.path)
    with pytest.raises(ValueError, match="a file never makes rewardlab import code") as error:
        llm_reward.load_reward(path)
    assert "--env 'helper_env_module:Helper-v0'" in str(error.value)
    with pytest.raises(
        ValueError, match="was written for helper_env_module:Helper-v0, not CartPole-v1"
    ):
        llm_reward.load_reward(path, "CartPole-v1")
    assert (
        main(
            [
                "train",
                "--env",
                "CartPole-v1",
                "--reward-program",
                "best_reward.py",
                "--logdir",
                "runs",
            ]
        )
        == 2
    )
    assert "not CartPole-v1" in capsys.readouterr().err
    assert (
        not marker.exists() and "helper_env_module" not in sys.modules and sys.path == import_path
    )
    # the env is named on the marker's own line: an empty one does not take the next line's word
    path.write_text(
        "# rewardlab-env:\nhelper_env_module:Helper-v0\ndef compute_reward(next_theta):\n"
        "    return next_theta, {}\n"
    )
    with pytest.raises(ValueError, match="does not say which env it is for"):
        llm_reward.load_reward(path)
