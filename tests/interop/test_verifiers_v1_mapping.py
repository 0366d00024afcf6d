"""verifiers.v1 traces as looprl's records: stop conditions and errors as termination reasons (docs/environments.md
table), rewards and metrics as components, the split a taskset's `split` field gets, and the local agent defaults."""

import pytest
from tests.support.verifiers_line import require_v1

vf = require_v1()

from looprl.errors import UserError  # noqa: E402
from looprl.interop.verifiers.v1_config import env_config, split_name  # noqa: E402
from looprl.interop.verifiers.v1_results import components, termination  # noqa: E402


def trace(stop=None, ok=True, errors=(), finish=None, timeout=False):
    t = vf.Trace(task=vf.TraceTask(type="T", data=vf.TaskData()), agent=vf.AgentInfo(config=vf.AgentConfig()))
    t.stop_condition, t.ok, t.is_timeout = stop, ok, timeout
    t.errors = [vf.Error(type=kind, message=message) for kind, message in errors]
    if finish:
        t.calls = [vf.ModelCall(finish_reason=finish)]
    return t


@pytest.mark.parametrize("t,reason", [
    (trace("agent_completed"), "finished"),
    (trace("tool_budget"), "finished"),  # the env's own @vf.stop
    (trace("agent_completed", finish="length"), "output_exceeded"),
    (trace("max_turns"), "max_turns_exceeded"),
    (trace("max_output_tokens"), "output_exceeded"),
    (trace("max_input_tokens"), "context_exceeded"),
    (trace("max_total_tokens"), "context_exceeded"),
    (trace("agent_timeout", ok=False, timeout=True), "timeout"),
    (trace("provider_error", ok=False, errors=[("ProviderError", "upstream 400")]), "model_error"),
    (trace("interception_error", ok=False, errors=[("InterceptionError", "transport")]), "model_error"),
    (trace("toolset_error", ok=False, errors=[("ToolsetError", "building tool servers: boom")]), "tool_error"),
    (trace("harness_error", ok=False, errors=[("HarnessError", "exited 1")]), "harness_error"),
    (trace("agent_completed", ok=False, errors=[("TaskError", "task T scoring: ValueError: x")]), "reward_error"),
    (trace("task_error", ok=False, errors=[("TaskError", "task setup: OSError: x")]), "env_error"),
    (trace("sandbox_error", ok=False, errors=[("SandboxError", "gone")]), "env_error"),
    (trace("error", ok=False, errors=[("RuntimeError", "x")]), "env_error"),
])
def test_stop_conditions_and_errors_map_to_termination_reasons(t, reason):
    assert termination(t)[0] == reason


def test_failures_keep_verifiers_error_text():
    assert termination(trace("harness_error", ok=False, errors=[("HarnessError", "exited 1")]))[1] == \
        "HarnessError: exited 1"


def test_rewards_are_scores_and_metrics_components_unscored_ones_left_out():
    t = trace("agent_completed")
    t.record_reward("correct", 1.0, 2.0)
    t.rewards["judge"] = None
    t.metrics.update({"chars": 3, "skipped": None})
    assert components(t) == {"correct": 1.0, "chars": 3.0}


@pytest.mark.parametrize("annotation,split,name", [
    (str, "train", "train"), (str, "eval", "test"),
    ("Literal", "eval", "eval"), ("LiteralTest", "eval", "test"), ("LiteralValidation", "eval", "validation"),
])
def test_looprl_splits_onto_a_taskset_split_field(annotation, split, name):
    from typing import Literal

    annotation = {"Literal": Literal["train", "eval"], "LiteralTest": Literal["train", "test"],
                  "LiteralValidation": Literal["train", "validation"]}.get(annotation, annotation)
    assert split_name(annotation, split) == name


def test_unknown_env_and_bad_env_args_are_user_errors():
    with pytest.raises(UserError, match="not found"):
        env_config("no-such-env-v1", {}, "train")


def test_the_venvs_uv_joins_the_path_harnesses_inherit(monkeypatch, tmp_path):
    import shutil

    from looprl.interop.verifiers.v1_env import ensure_uv

    monkeypatch.setenv("PATH", str(tmp_path))  # a venv used without activating it: its bin/ is not on PATH
    assert shutil.which("uv") is None
    ensure_uv()
    assert shutil.which("uv")
