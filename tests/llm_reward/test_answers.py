"""Reward code as real LLMs write it: every correct answer trains, every unsafe one is refused,
every buggy one comes back with a message that names its line (corpora in tests/support:
llm_answers.py, and llm_answers_envs.py for MiniGrid, each MuJoCo task and a user's env)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
import torch
from llm_answers import ANSWERS, STRUCTURED_CODE, Answer
from llm_answers_envs import ENV_ANSWERS, USER_DESCRIBED, USER_SPACES
from user_envs import CORRIDOR_SOURCE, write_corridor, write_env

from rewardlab import envs, llm_reward
from rewardlab.envs.description_files import load_description, use_description
from rewardlab.envs.descriptions import EnvDescription
from rewardlab.llm_reward.programs.answers import find_code
from rewardlab.llm_reward.programs.checks import CheckError
from rewardlab.llm_reward.programs.errors import ProgramError
from rewardlab.llm_reward.programs.loading import reward_file_text
from rewardlab.llm_reward.programs.program import RewardFunction
from rewardlab.llm_reward.programs.source import RewardProgram

TRAINS = [a for a in ANSWERS if a.outcome == "trains"]
REFUSED = [a for a in ANSWERS if a.outcome == "refused"]
FAILS = [a for a in ANSWERS if a.outcome == "fails"]


def run_steps(answer: Answer, steps: int = 40, num_envs: int = 8) -> RewardFunction:
    """Check the answer for its env and run it on real batched transitions (episodes end too)."""
    program = RewardProgram.from_llm_answer(answer.text)
    if answer.env_id.endswith("-v5"):
        pytest.importorskip("mujoco.batch")
    program.check(answer.env_id)
    function = RewardFunction(program, envs.describe(answer.env_id))
    env = envs.make(answer.env_id, num_envs=num_envs, seed=0)
    obs, _ = env.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        space = env.single_action_space
        if hasattr(space, "n"):
            actions = torch.randint(0, space.n, (num_envs,), generator=generator)
        else:
            actions = torch.rand((num_envs, *space.shape), generator=generator) * 2 - 1
        next_obs, _, terminated, _, info = env.step(actions)
        reward, components = function(obs, actions, info["final_obs"], terminated)
        assert reward.shape == (num_envs,) and bool(torch.isfinite(reward).all())
        assert all(value.shape == (num_envs,) for value in components.values())
        obs = next_obs
    return function


def test_the_corpus_is_large_and_varied() -> None:
    assert len(ANSWERS) >= 30 and len(TRAINS) >= 15 and REFUSED and FAILS
    assert len({a.name for a in ANSWERS}) == len(ANSWERS)


@pytest.mark.parametrize("answer", TRAINS, ids=lambda a: a.name)
def test_every_correct_answer_runs(answer: Answer) -> None:
    function = run_steps(answer)
    per_state = "per_state" in answer.name or "if" in answer.name.split("_")
    assert function.per_state == per_state, "batched code runs batched; per-state code per env"
    if per_state:  # pure torch per-state code is mapped by torch.vmap; Python control flow loops
        expected = "vmap" if answer.name == "per_state_torch_dot" else "loop"
        assert function.per_state_mode == expected


@pytest.mark.parametrize("answer", REFUSED, ids=lambda a: a.name)
def test_every_unsafe_or_undefined_answer_is_refused_with_its_line(answer: Answer) -> None:
    with pytest.raises(CheckError) as error:
        RewardProgram.from_llm_answer(answer.text).check(answer.env_id)
    text = str(error.value)
    assert answer.expect in text and "line " in text, text


@pytest.mark.parametrize("answer", FAILS, ids=lambda a: a.name)
def test_every_buggy_answer_fails_with_a_message_that_names_its_line(answer: Answer) -> None:
    with pytest.raises(ProgramError) as error:
        run_steps(answer, steps=3)
    message = f"{error.value.reason}\n{error.value.traceback}"
    assert answer.expect in message and "line " in message, message


def test_no_message_sends_the_model_in_a_circle() -> None:
    """Advice the checks once gave and then refused: drop the decorator, the typing import."""
    messages = []
    for answer in REFUSED:
        try:
            RewardProgram.from_llm_answer(answer.text).check(answer.env_id)
        except CheckError as error:
            messages.append(str(error))
    for answer in FAILS:
        try:
            run_steps(answer, steps=3)
        except ProgramError as error:
            messages.append(error.reason)
    for message in messages:
        assert "without @torch.jit.script" not in message and "typing" not in message
        # not the fix for a collapsed batch
        assert "full_like" not in message or "constant" in message


def test_structured_output_and_prose_names_are_taken_as_the_model_meant_them() -> None:
    """The code inside a JSON reply (bare or fenced) is the program; a component's prose name
    becomes an identifier, and the program's notes say which."""
    for name in ("structured_output_json", "structured_output_json_fenced"):
        answer = next(a for a in ANSWERS if a.name == name)
        assert RewardProgram.from_llm_answer(answer.text).source == STRUCTURED_CODE
    answer = next(a for a in ANSWERS if a.name == "prose_component_names")
    function = run_steps(answer, steps=2)
    renamed = {
        "cart position (m)": "cart_position_m",
        "pole angle (rad)": "pole_angle_rad",
        "angular velocity penalty": "angular_velocity_penalty",
    }
    assert function.program.notes == tuple(
        f"the component {name!r} is reported as {plain} (component names are identifiers)"
        for name, plain in renamed.items()
    )


def test_normalisation_keeps_lines_and_says_what_it_removed() -> None:
    answer = next(a for a in ANSWERS if a.name == "eureka_jit_typing")
    program = RewardProgram.from_llm_answer(answer.text)
    original = llm_reward.programs.answers.extract_code(answer.text)
    assert len(program.source.splitlines()) == len(original.splitlines())
    assert any("torch.jit.script" in note for note in program.notes)
    assert any("annotations" in note for note in program.notes)
    constants = next(a for a in ANSWERS if a.name == "constant_as_default")
    program = RewardProgram.from_llm_answer(constants.text)
    assert program.inputs(envs.describe("CartPole-v1")) == ("next_theta", "next_x")
    assert len(program.constant_notes(envs.describe("CartPole-v1"))) == 2


@pytest.mark.parametrize(
    "name",
    [
        "eureka_jit_typing",
        "text2reward_per_state_if",
        "icpl_in_place",
        "structured_output_json",
        "prose_component_names",
    ],
)
def test_answers_train_in_the_sandbox(name: str, tmp_path) -> None:
    answer = next(a for a in ANSWERS if a.name == name)
    result = llm_reward.evaluate(
        RewardProgram.from_llm_answer(answer.text),
        answer.env_id,
        steps=256,
        num_envs=4,
        ppo_kwargs={"n_steps": 32, "n_epochs": 1},
        num_checkpoints=1,
        eval_episodes=2,
        timeout_s=120,
    )
    assert result.ok, result.failure
    assert result.notes or name in ("icpl_in_place", "structured_output_json")
    if name == "prose_component_names":  # trained under identifiers, and the model is told so
        notes = " ".join(result.notes)
        assert "the component 'cart position (m)' is reported as cart_position_m" in notes
        assert {
            "program/cart_position_m",
            "program/pole_angle_rad",
            "program/angular_velocity_penalty",
        } <= set(result.curve[-1].components)
    if "per_state" in name or "if" in name:
        note = next(note for note in result.notes if "once per env" in note)
        assert "line 4: `if terminated:` needs one value" in note, note


@pytest.mark.parametrize(
    "answer", [a for a in TRAINS if not a.env_id.endswith("-v5")], ids=lambda a: a.name
)
def test_one_env_gets_the_reward_its_row_gets_in_a_batch(answer: Answer) -> None:
    """A batch of one (a Gymnasium env wrapped) takes code written for one state and code
    written for a batch alike, and rewards an env as a batch of eight rewards its row."""
    program = RewardProgram.from_llm_answer(answer.text)
    description = envs.describe(answer.env_id)
    batch, alone = RewardFunction(program, description), RewardFunction(program, description)
    env = envs.make(answer.env_id, num_envs=8, seed=1)
    obs, _ = env.reset(seed=1)
    generator = torch.Generator().manual_seed(1)
    for _ in range(6):
        space = env.single_action_space
        if hasattr(space, "n"):
            actions = torch.randint(0, space.n, (8,), generator=generator)
        else:
            actions = torch.rand((8, *space.shape), generator=generator) * 2 - 1
        next_obs, env_reward, terminated, _, info = env.step(actions)
        together, _ = batch(obs, actions, info["final_obs"], terminated, env_reward)
        for row in range(8):
            rows = slice(row, row + 1)
            reward, _ = alone(
                obs[rows],
                actions[rows],
                info["final_obs"][rows],
                terminated[rows],
                env_reward[rows],
            )
            assert reward.shape == (1,)
            torch.testing.assert_close(reward[0], together[row], rtol=1e-5, atol=1e-5)
        obs = next_obs


# ------------------------------------------- the envs the first corpus does not cover
@pytest.fixture(scope="module")
def user_envs(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, tuple[str, EnvDescription, dict | None]]]:
    """The corridor under its description file, and the same env known by its spaces alone."""
    folder = tmp_path_factory.mktemp("user_envs")
    sys.path.insert(0, str(folder))
    try:
        described = write_corridor(folder, "answers_corridor")
        data = load_description(folder / "corridor.toml", described)[1]
        plain = write_env(folder, "answers_plain_corridor", CORRIDOR_SOURCE)
        yield {
            USER_DESCRIBED: (described, use_description(data), data),
            USER_SPACES: (plain, envs.describe(plain), None),
        }
    finally:
        sys.path.remove(str(folder))


def resolve(answer: Answer, user_envs: dict) -> tuple[str, EnvDescription, dict | None]:
    """The env id, description and description data an answer was written for."""
    if answer.env_id in user_envs:
        return user_envs[answer.env_id]
    if answer.env_id.startswith("MiniGrid"):
        pytest.importorskip("minigrid")
    if answer.env_id.endswith("-v5") or answer.env_id.startswith(
        ("Ant-", "HalfCheetah-", "Hopper-")
    ):
        pytest.importorskip("mujoco.batch")
    return answer.env_id, envs.describe(answer.env_id), None


def run_on_env(
    answer: Answer, user_envs: dict, steps: int = 30, num_envs: int = 8
) -> RewardFunction:
    """Check the answer for its env and run it on that env's real batched transitions."""
    env_id, description, _ = resolve(answer, user_envs)
    program = RewardProgram.from_llm_answer(answer.text)
    program.check(description)
    function = RewardFunction(program, description)
    env = envs.make(env_id, num_envs=num_envs, seed=0)
    obs, _ = env.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        space = env.single_action_space
        if hasattr(space, "n"):
            actions = torch.randint(0, int(space.n), (num_envs,), generator=generator)
        else:
            actions = torch.rand((num_envs, *space.shape), generator=generator) * 2 - 1
        next_obs, env_reward, terminated, _, info = env.step(actions)
        reward, components = function(obs, actions, info["final_obs"], terminated, env_reward)
        assert reward.shape == (num_envs,) and bool(torch.isfinite(reward).all())
        assert all(value.shape == (num_envs,) for value in components.values())
        obs = next_obs
    return function


def test_the_env_corpus_covers_every_task() -> None:
    covered = {answer.env_id for answer in ENV_ANSWERS}
    mujoco = {
        "HalfCheetah-v5",
        "Hopper-v5",
        "Walker2d-v5",
        "InvertedPendulum-v5",
        "Ant-TurnInPlace-v0",
        "HalfCheetah-Backward-v0",
        "Hopper-Backward-v0",
    }  # Ant-v5 is in the first corpus
    assert mujoco <= covered and {USER_DESCRIBED, USER_SPACES} <= covered
    assert len({env for env in covered if env.startswith("MiniGrid")}) >= 6
    for outcome in ("trains", "refused", "fails"):
        assert sum(answer.outcome == outcome for answer in ENV_ANSWERS) >= 3
    assert not {answer.name for answer in ENV_ANSWERS} & {answer.name for answer in ANSWERS}


@pytest.mark.parametrize(
    "answer", [a for a in ENV_ANSWERS if a.outcome == "trains"], ids=lambda a: a.name
)
def test_every_correct_env_answer_runs_and_loads_from_a_file(
    answer: Answer, user_envs: dict, tmp_path
) -> None:
    function = run_on_env(answer, user_envs)
    assert function.per_state == ("per_state" in answer.name), (
        "batched code runs batched; per-state code per env"
    )
    env_id, description, data = resolve(answer, user_envs)
    path = tmp_path / "best_reward.py"
    path.write_text(reward_file_text(function.program.source, env_id, ["from the corpus"]))
    loaded = llm_reward.load_reward(path, env_id, description=data)
    assert loaded.program.source.endswith(function.program.source) and loaded.env_id == env_id


@pytest.mark.parametrize(
    "answer", [a for a in ENV_ANSWERS if a.outcome == "refused"], ids=lambda a: a.name
)
def test_every_env_answer_with_wrong_names_is_refused_naming_its_line(
    answer: Answer, user_envs: dict
) -> None:
    _, description, _ = resolve(answer, user_envs)
    with pytest.raises(CheckError) as error:
        RewardProgram.from_llm_answer(answer.text).check(description)
    text = str(error.value)
    assert answer.expect in text and "line " in text, text
    assert text.count("the variables of this environment are:") == 1


@pytest.mark.parametrize(
    "answer", [a for a in ENV_ANSWERS if a.outcome == "fails"], ids=lambda a: a.name
)
def test_every_buggy_env_answer_fails_naming_its_cause_and_line(
    answer: Answer, user_envs: dict
) -> None:
    with pytest.raises(ProgramError) as error:
        run_on_env(answer, user_envs, steps=3)
    message = f"{error.value.reason}\n{error.value.traceback}"
    assert answer.expect in message and "line " in message, message


def test_the_recommended_of_two_options_is_trained_and_said() -> None:
    answer = next(a for a in ENV_ANSWERS if a.name == "hopper_backward_two_options")
    found = find_code(answer.text)
    assert "next_x_velocity" in found.source and "/ 0.0" not in found.source
    assert found.note == (
        "the answer held 2 code blocks defining the reward function; the first was trained, "
        "the one the answer recommends (send one block: the one to train)"
    )


@pytest.mark.parametrize(
    "name", ["hopper_text2reward_per_state", "halfcheetah_eureka", "user_described_eureka"]
)
def test_env_answers_train_in_the_sandbox(
    name: str, user_envs: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = next(a for a in ENV_ANSWERS if a.name == name)
    env_id, _, data = resolve(answer, user_envs)
    result = llm_reward.evaluate(
        RewardProgram.from_llm_answer(answer.text),
        env_id,
        steps=128,
        num_envs=4,
        ppo_kwargs={"n_steps": 32, "n_epochs": 1},
        num_checkpoints=1,
        eval_episodes=1,
        timeout_s=120,
        description=data,
    )
    assert result.ok, result.failure
