"""Description files are data: their expressions are total and cheap whatever numbers they hold,
their names are identifiers, and what they cost is bounded when the file is read."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from rewardlab import envs
from rewardlab.agents.evaluation import play_episodes
from rewardlab.envs import description_files
from rewardlab.envs.description_files import (
    compile_expression,
    description_from_data,
    load_description,
)

CARTPOLE = '''summary = "balance the pole"
{top}
[[state]]
name = "x"
index = 0
meaning = "the cart's position"
[[state]]
name = "theta"
index = 2
meaning = "the pole's angle"
{derived}
'''


def write(tmp_path: Path, top: str = "", derived: str = "") -> Path:
    path = tmp_path / "cartpole.toml"
    path.write_text(CARTPOLE.format(top=top, derived=derived))
    return path


def data_with(success: str, derived: dict[str, str]) -> dict:
    """A description's data, as a reward file carries it, over CartPole's first column."""
    return {"env_id": "CartPole-v1", "summary": "s", "action": {"meaning": "a"}, "success": success,
            "state": [{"name": "x", "index": 0, "meaning": "m"}], "derived": derived}


def value(text: str) -> torch.Tensor:
    return compile_expression(text, set(), "test")[0]({})


def test_numbers_are_float64_tensors_that_saturate_instead_of_growing() -> None:
    assert isinstance(value("2**2000"), torch.Tensor) and value("2**2000").item() == math.inf
    assert value("9**9**9").item() == math.inf  # Python's ints would compute a billion digits
    assert value("1" + "0" * 400).item() == math.inf and value("-2**2000").item() == -math.inf
    assert value("1 // 0").item() == math.inf and math.isnan(value("0 % 0").item())  # total
    assert value("7 // 2 + 2**-1 + pi").item() == pytest.approx(3.5 + math.pi)
    assert value("3 > 2 and not 1 > 2").dtype == torch.bool


def test_a_huge_power_in_a_rule_is_cheap_where_training_measures_it(tmp_path: Path) -> None:
    """The success rule, partial success and a derived variable, as training's evaluation runs
    them."""
    rules = 'success = "x > 9**9**9 or theta > 9**9**9**9"\npartial_success = "x / 9**9**9 + 0.5"'
    path = write(tmp_path, rules, '[derived]\nfar = "x ** 9**9**9"')
    description, data = load_description(path, "CartPole-v1")
    for rebuilt in (description, description_from_data(data)):
        obs = torch.tensor([[0.5, 0.0, 0.1, 0.0], [2.0, 0.0, -0.1, 0.0]])
        flags = torch.zeros(2, dtype=torch.bool)
        assert rebuilt.success(obs, flags, flags).tolist() == [False, False]
        assert rebuilt.partial_success(obs).tolist() == [0.5, 0.5]
        assert rebuilt.state_tensors(obs)["far"].tolist() == [0.0, math.inf]
    env = envs.make("CartPole-v1", num_envs=2, seed=0)
    def push_left(obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(obs), dtype=torch.int64)

    episodes = play_episodes(push_left, env, seed=0, success=description.success,
                             partial=description.partial_success)
    assert episodes.success_rate == 0.0


def test_a_constant_rule_is_one_value_per_row() -> None:
    data = {**data_with("1 < 2", {"half": "0.5"}), "partial_success": "2**-1"}
    description = description_from_data(data)
    obs = torch.zeros((3, 4))
    flags = torch.zeros(3, dtype=torch.bool)
    assert description.success(obs, flags, flags).tolist() == [True] * 3
    assert description.partial_success(obs).tolist() == [0.5] * 3
    half = description.state_tensors(obs)["half"]
    half += 1  # a program may work in place on its inputs
    assert half.tolist() == [1.5] * 3


def test_each_derived_variable_is_computed_once_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each variable of this chain uses the two above it: read one by one, they cost 2**n."""
    derived = {"d0": "x", "d1": "d0 + x"} | {f"d{i}": f"d{i - 1} + d{i - 2}" for i in range(2, 20)}
    description = description_from_data(data_with("d19 > 1e9", derived))
    computed = []
    per_row = description_files._per_row
    monkeypatch.setattr(description_files, "_per_row",
                        lambda *args: computed.append(1) or per_row(*args))
    obs = torch.ones((2, 4))
    flags = torch.zeros(2, dtype=torch.bool)
    assert description.state_tensors(obs)["d19"].tolist() == [10946.0] * 2  # Fibonacci's 21st
    computed.clear()
    assert description.success(obs, flags, flags).tolist() == [False, False]
    assert len(computed) == 21  # the 20 derived variables and the rule itself


@pytest.mark.parametrize(("derived", "message"), [
    ({f"d{i}": "x" for i in range(33)}, "33 derived variables; a description may derive at most"),
    ({"bad": "sqrt(x, x)"}, "calls sqrt with 2 arguments; it takes 1"),
    ({"pi": "3.0"}, "derived variable 'pi' is a name the expressions already give"),
    ({"truncated": "x"}, "derived variable 'truncated' is a name the expressions already give"),
    ({f"d{i}": "x + " * 120 + "x" for i in range(9)}, "characters in all, and at most 4000"),
    ({"bad": "atan2(x)"}, "calls atan2 with 1 arguments; it takes 2"),
])
def test_sizes_and_calls_are_checked_when_the_file_is_read(tmp_path: Path, derived: dict,
                                                           message: str) -> None:
    table = "[derived]\n" + "\n".join(f'{name} = "{text}"' for name, text in derived.items())
    with pytest.raises(ValueError, match=message):
        load_description(write(tmp_path, derived=table), "CartPole-v1")


@pytest.mark.parametrize("rule", ["x \x1b[2J>= 6", "y >= 6", "x >= sqrt(x, x)"])
def test_a_bad_success_rule_is_quoted_once_with_its_escapes_shown(tmp_path: Path,
                                                                  rule: str) -> None:
    with pytest.raises(ValueError) as caught:
        load_description(write(tmp_path, top=f"success = {json.dumps(rule)}"), "CartPole-v1")
    message = str(caught.value)
    assert message.count(repr(rule)) == 1, message
    assert "\x1b" not in message and "success must be" in message


def test_a_huge_slice_index_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "slice.toml"
    text = CARTPOLE.format(top="", derived="")
    path.write_text(text.replace("index = 0", f'index = "0:{"9" * 5000}"'))
    with pytest.raises(ValueError, match=r"index must be a column number \(3\) or a") as caught:
        load_description(path, "CartPole-v1")
    assert "\n" not in str(caught.value)


# "\uff58" (a full-width x) is an identifier that Python reads as x: a program's parameter
# of that name was given another variable's values
@pytest.mark.parametrize("name", ["\x1b]0;pwned\x07", "cart position (m)", "if", "_hidden", "1st",
                                  "", "\uff58", "\ufb01t"])
def test_every_name_in_a_file_is_an_identifier_or_refused_in_one_line(tmp_path: Path,
                                                                       name: str) -> None:
    path = tmp_path / "names.toml"
    text = CARTPOLE.format(top="", derived="")
    path.write_text(text.replace('name = "x"', f"name = {json.dumps(name)}"))
    with pytest.raises(ValueError) as caught:
        load_description(path, "CartPole-v1")
    assert len(str(caught.value).splitlines()) == 1
    assert not any(character in str(caught.value) for character in "\x1b\x07")
    if name:
        assert f"state 1's name {name!r} must be a Python identifier" in str(caught.value)
    # the same names where a reward file carries its description, and as class or derived names
    for data in ({**data_with("none", {}), "state": [{"name": name, "index": 0, "meaning": "m"}]},
                 {**data_with("none", {name: "x"})}, {**data_with("none", {}), "class_name": name}):
        if name or "class_name" not in data:
            with pytest.raises(ValueError, match="must be a Python identifier|needs name"):
                description_from_data(data)


@pytest.mark.parametrize(("name", "text", "message"), [
    ("deep.toml", "a = " + "[" * 100_000, "nests tables or arrays too deeply"),
    ("deep.json", "[" * 100_000, "nests tables or arrays too deeply"),
    ("binary.toml", bytes(range(256)), "not a UTF-8 text file"),
    ("huge.toml", "# " + "x" * 2**21, "it has more than 2,097,152 characters"),
])
def test_a_file_that_is_no_description_is_refused_in_one_line(tmp_path: Path, name: str,
                                                              text: str | bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=message) as caught:
        load_description(path, "CartPole-v1")
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
