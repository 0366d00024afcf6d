"""Config loading: @ files deep-merged left to right, dotted overrides, errors with key paths."""

import pytest
from pydantic import BaseModel, ConfigDict, Field

from looprl.config import load_config, merge_arguments
from looprl.errors import UserError


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    group_size: int = Field(8, gt=0)
    weights: dict[str, float] = Field(default_factory=dict)


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_steps: int = 10
    name: str = "x"
    orchestrator: Inner = Field(default_factory=Inner)


def test_files_merge_left_to_right_then_overrides(tmp_path):
    (tmp_path / "a.toml").write_text('name = "a"\nmax_steps = 5\n[orchestrator]\ngroup_size = 4\nweights = {f = 1.0}\n')
    (tmp_path / "b.toml").write_text("[orchestrator]\ngroup_size = 2\n")
    config = load_config(Outer, ["@", str(tmp_path / "a.toml"), f"@{tmp_path / 'b.toml'}",
                                 "--max_steps", "2", "--orchestrator.weights.g=0.5", "--name", "run one"])
    assert config.max_steps == 2 and config.name == "run one"
    assert config.orchestrator.group_size == 2
    assert config.orchestrator.weights == {"f": 1.0, "g": 0.5}


def test_overrides_are_toml_literals_when_they_parse():
    assert merge_arguments(["--a.b", "[1, 2]", "--c", "true", "--d", "runs/x"]) == {
        "a": {"b": [1, 2]}, "c": True, "d": "runs/x"}


def test_overrides_that_are_json_objects_or_arrays_read_as_json():
    assert merge_arguments(["--env.args", '{"max_turns": 2, "paths": ["a.jsonl"]}', "--x", "{not json"]) == {
        "env": {"args": {"max_turns": 2, "paths": ["a.jsonl"]}}, "x": "{not json"}


@pytest.mark.parametrize(("argv", "message"), [
    (["--orchestrator.group_size", "0"], "orchestrator.group_size: Input should be greater than 0"),
    (["--orchestrator.grup_size", "3"], "orchestrator.grup_size: Extra inputs are not permitted"),
    (["--max_steps", "many"], "max_steps: Input should be a valid integer"),
    (["@", "/nonexistent.toml"], "does not exist"),
    (["stray"], "unexpected argument 'stray'"),
    (["--max_steps"], "--max_steps needs a value"),
])
def test_errors_name_the_key(argv, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[")):
        load_config(Outer, argv)
