"""Reward programs: env descriptions, extraction from LLM answers, checks, loading, the
wrapper, reference programs and sandboxed evaluation (the hostile corpus is in
``test_llm_reward_hostile.py``)."""

from __future__ import annotations

import json
import math
import os

import gymnasium
import pytest
import torch

from rewardlab import envs, llm_reward
from rewardlab.envs.descriptions import ActionVariable, EnvDescription, StateVariable, column
from rewardlab.llm_reward.programs.checks import CheckError, check_source
from rewardlab.llm_reward.programs.loading import GymnasiumProgramReward
from rewardlab.llm_reward.programs.program import ProgramError, RewardFunction, extract_code
from rewardlab.llm_reward.programs.references import registered_reference_programs
from rewardlab.llm_reward.programs.wrapper import ProgramReward
from rewardlab.llm_reward.sandbox.forkserver import ForkServer
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
    assert description.variables == (*names, *(f"next_{n}" for n in names), "action", "terminated", "env_reward")
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
    inputs = description.reward_inputs(obs, actions, info["final_obs"], terminated, env_reward=reward)
    assert list(inputs) == list(description.variables)
    assert torch.equal(inputs["env_reward"], reward.float())
    # without the env's reward (stored transitions), every other input, and a clear error for it
    assert "env_reward" not in description.reward_inputs(obs, actions, info["final_obs"], terminated)
    with pytest.raises(ValueError, match="env_reward, the env's own reward, which is not known here"):
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
REWARD = '''def compute_reward(next_theta):
    upright = 1.0 - (next_theta / 0.21) ** 2
    return upright, {"upright": upright}
'''


@pytest.mark.parametrize(
    "answer",
    [
        f"Here it is:\n```python\n{REWARD}```\nHope it helps.",
        f"```\n{REWARD}```",
        f"~~~py\n{REWARD}~~~",
        f"First the helper:\n```python\nimport torch\nX = 1\n```\nthen:\n```python\n{REWARD}```\n"
        "and its output:\n```json\n{\"def compute_reward\": 1}\n```",
        f"Sure! This reward works.\n\nimport torch\n\n{REWARD}\nThat is all; it rewards being upright.",
        f"```python\n{REWARD}",  # the answer was cut before the closing fence
        f"```python\ndef compute_reward(x):\n    return x, {{}}\n```\nBetter:\n```python\n{REWARD}```",
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
    program = llm_reward.RewardProgram.from_source("def compute_reward(x, velocity):\n    return x\n")
    with pytest.raises(llm_reward.CheckError) as raised:
        program.check("CartPole-v1")
    (finding,) = raised.value.findings
    assert finding.line == 1
    assert "`velocity`" in finding.message and "x, x_dot, theta" in finding.message
    llm_reward.RewardProgram.from_source("def compute_reward(position, velocity):\n    return position\n").check(
        "MountainCar-v0"
    )


def test_findings_name_the_line_and_the_fix() -> None:
    findings = check_source("import torch\n\ndef compute_reward(x):\n    y = torch.os\n    return open('f')\n")
    messages = {finding.line: finding.message for finding in findings}
    assert "`.os`" in messages[4]
    assert "`open`" in messages[5]
    error = llm_reward.CheckError(findings)
    assert "line 4:" in str(error) and "line 5:" in str(error)


# ------------------------------------------------------------- running a program
def test_reward_function_checks_and_returns_components() -> None:
    function = load("def compute_reward(x, next_x, action):\n    d = next_x - x\n"
                    "    return d + action, {'moved': d, 'pushed': action.float()}\n")
    obs, next_obs = torch.zeros(3, 4), torch.ones(3, 4)
    reward, components = function(obs, torch.tensor([0, 1, 1]), next_obs, torch.zeros(3, dtype=torch.bool))
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
        ("return x, {'c': 1.0}", r"line 2: component 'c' is one number \(float\) for the whole batch"),
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
    function = load("import torch\n\ndef helper(x):\n    return torch.cat(x)\n\n"
                    "def compute_reward(x):\n    return helper(x), {}\n")
    obs = torch.zeros(2, 4)
    with pytest.raises(ProgramError) as raised:
        function(obs, torch.zeros(2, dtype=torch.int64), obs, torch.zeros(2, dtype=torch.bool))
    text = raised.value.traceback
    assert 'File "<reward_program>", line 7, in compute_reward' in text
    assert 'File "<reward_program>", line 4, in helper' in text
    assert "llm_reward" not in text and "TypeError" in text


def test_in_place_work_on_an_input_is_allowed_and_touches_nothing_else() -> None:
    # ICPL's idiom: start from a variable and change it in place; each input is the program's own
    function = load("def compute_reward(x, next_x):\n    y = x\n    y.mul_(2)\n    next_x -= 1\n"
                    "    return y + next_x, {}\n")
    obs = torch.ones(2, 4)
    reward, _ = function(obs, torch.zeros(2, dtype=torch.int64), obs, torch.zeros(2, dtype=torch.bool))
    assert torch.equal(reward, torch.full((2,), 2.0))
    assert torch.equal(obs, torch.ones(2, 4))  # the env's batch is untouched


def test_wrapper_rewards_true_last_states_and_keeps_extrinsic() -> None:
    function = load("def compute_reward(next_x, terminated):\n"
                    "    return next_x, {'next_x': next_x, 'ended': terminated.float()}\n")
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


ENV_REWARD_PROGRAM = "def compute_reward(env_reward, x):\n    return 2.0 * env_reward - x.abs(), {'own': env_reward}\n"


def test_a_program_takes_the_envs_own_reward_in_both_wrappers() -> None:
    # MountainCar pays -1 a step: the program sees it batched and as Gymnasium's float
    program = llm_reward.RewardProgram.from_source("def compute_reward(env_reward, position):\n"
                                                   "    return 2.0 * env_reward + position, {'own': env_reward}\n")
    description = llm_reward.describe("MountainCar-v0")
    batched = ProgramReward(envs.make("MountainCar-v0", num_envs=3, seed=0), RewardFunction(program, description))
    obs, _ = batched.reset(seed=0)
    _, reward, _, _, info = batched.step(torch.ones(3, dtype=torch.int64))
    assert torch.equal(info["reward_components"]["program/own"], torch.full((3,), -1.0))
    assert torch.allclose(reward, -2.0 + obs[:, 0])  # position before the step
    single = GymnasiumProgramReward(gymnasium.make("MountainCar-v0"), RewardFunction(program, description))
    obs, _ = single.reset(seed=0)
    _, reward, _, _, info = single.step(1)
    assert info["reward_components"]["program/own"] == -1.0
    assert reward == pytest.approx(-2.0 + float(obs[0]))


def test_a_program_on_the_envs_own_reward_trains_in_the_sandbox(tmp_path) -> None:
    program = llm_reward.RewardProgram.from_source(ENV_REWARD_PROGRAM)
    result = llm_reward.evaluate(program, "CartPole-v1", steps=512, seeds=(0,), timeout_s=90, num_envs=4,
                                 ppo_kwargs=TINY_PPO, num_checkpoints=2, eval_episodes=2)
    assert result.ok, result.failure
    assert result.curve[-1].components["program/own"] == pytest.approx(1.0)  # CartPole's +1 a step


# ------------------------------------------------------------ reference programs
# The potentials (with the weights) the human reference programs write out as source.
HUMAN_POTENTIALS = {
    "CartPole-v1": lambda: potentials.CartPoleUpright(weight=1.0),
    "MountainCar-v0": lambda: potentials.MountainCarEnergy(weight=100.0, goal_position=0.5),
    "MountainCarContinuous-v0": lambda: potentials.MountainCarEnergy(weight=10.0, goal_position=0.45),
    "Acrobot-v1": lambda: potentials.AcrobotTipHeight(weight=10.0),
    "Pendulum-v1": lambda: potentials.PendulumEnergy(weight=5.0),
}


def shaping_of(env_id: str, obs: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
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
        program, "CartPole-v1", steps=1024, seeds=(0, 1), timeout_s=90, run_dir=tmp_path / "run",
        num_envs=4, ppo_kwargs=TINY_PPO, num_checkpoints=4, eval_episodes=3,
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
    assert llm_reward.EvalResult.from_dict(json.loads(result.to_json())) == result
    run = tmp_path / "run"
    assert json.loads((run / "result.json").read_text())["ok"] is True
    assert (run / "reward_program.py").read_text() == program.source
    assert list((run / "tensorboard").iterdir()), "PPO's TensorBoard logs are in the run folder"
    assert 0 < result.peak_rss_mb < 4096


def test_evaluate_reports_check_failures_without_running() -> None:
    program = llm_reward.RewardProgram("import os\n\ndef compute_reward(x):\n    return x\n",
                                       "compute_reward", ("x",))
    result = llm_reward.evaluate(program, "CartPole-v1", steps=64)
    assert not result.ok and result.failure.kind == "check"
    assert result.failure.findings == [
        "line 1: imports `os`; reward programs may only import math, numpy and torch"
    ]
    unknown_argument = llm_reward.RewardProgram.from_source("def compute_reward(speed):\n    return speed\n")
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
    with pytest.raises(TypeError, match="RewardProgram"):
        llm_reward.evaluate(program.source, "CartPole-v1")  # type: ignore[arg-type]


def test_evaluate_without_a_run_dir() -> None:
    program = llm_reward.reference_programs("Pendulum-v1")["human"]
    result = llm_reward.evaluate(
        program, "Pendulum-v1", steps=128, num_envs=4, ppo_kwargs=TINY_PPO, num_checkpoints=1,
        eval_episodes=2, timeout_s=120,
    )
    assert result.ok, result.failure
    assert result.run_dir is None and result.success_rate is None
    (point,) = result.curve
    assert -2000 < point.fitness <= 0 and set(point.components) == {"extrinsic", "program/task", "program/shaping"}
    assert point.components["program/task"] == pytest.approx(point.components["extrinsic"], abs=1e-5)


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


def test_an_answer_without_fences_costs_a_bounded_number_of_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    # red-team finding: one parse per line of an unfenced answer whose prefixes never parse
    # took 82 s of the search's own process for a 110 KB answer
    from rewardlab.llm_reward.programs import program as program_module

    calls = []
    real = program_module.parse_source
    monkeypatch.setattr(program_module, "parse_source", lambda source: calls.append(1) or real(source))
    answer = "def compute_reward(x):\n    y = (\n" + "    x + 1,\n" * 5000
    with pytest.raises(CheckError):
        llm_reward.RewardProgram.from_llm_answer(answer)
    assert 0 < len(calls) <= program_module.MAX_UNFENCED_PARSES
    # the usual unfenced answer, code then prose, is still found
    found = llm_reward.RewardProgram.from_llm_answer(
        "Sure:\ndef compute_reward(theta):\n    return -theta.abs(), {}\nThis keeps the pole up.\n")
    assert found.parameters == ("theta",)


def test_component_names_become_what_reports_take_and_huge_values_fail() -> None:
    # red-team finding: a name with a space (or past 56 characters) passed the program's
    # checks, trained to the end, and the caller then refused the whole result
    description = llm_reward.describe("CartPole-v1")
    long_name = "upright_bonus_for_keeping_the_pole_close_to_vertical_position"
    program = llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\n"
        f"    return -next_theta.abs(), {{'speed bonus': next_theta, {long_name!r}: next_theta}}\n")
    function = RewardFunction(program, description)
    states = torch.zeros((4, 4))
    _, components = function(states, torch.zeros(4, dtype=torch.int64), states, torch.zeros(4, dtype=torch.bool))
    assert list(components) == ["speed_bonus", long_name[:56]]
    clash = llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\n    return next_theta, {'a b': next_theta, 'a-b c': next_theta, 'a_b': next_theta}\n")
    with pytest.raises(ProgramError, match="both become 'a_b'"):
        RewardFunction(clash, description)(states, torch.zeros(4, dtype=torch.int64), states, torch.zeros(4, dtype=torch.bool))
    # finite float32 values near the largest overflowed the job's float32 means to inf
    huge = llm_reward.RewardProgram.from_source("def compute_reward(next_theta):\n    return next_theta + 3.0e38, {}\n")
    with pytest.raises(ProgramError, match="magnitude 3e"):
        RewardFunction(huge, description)(states, torch.zeros(4, dtype=torch.int64), states, torch.zeros(4, dtype=torch.bool))
