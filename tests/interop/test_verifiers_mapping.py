"""verifiers' stop conditions and errors as looprl's termination reasons (README table), and the adapter's
process hygiene: verifiers' signal handlers and stderr log handler do not stay installed."""

import logging
import signal
from pathlib import Path

import pytest
from tests.support.verifiers_line import require_classic

vf = require_classic()

from looprl.interop.verifiers.classic import env_class, termination  # noqa: E402

ENVS = Path(__file__).parent / "envs" / "verifiers"


@pytest.mark.parametrize("state,max_turns,reason", [
    ({"stop_condition": "max_turns_reached"}, 1, "finished"),
    ({"stop_condition": "max_turns_reached"}, 3, "max_turns_exceeded"),
    ({"stop_condition": "no_tools_called"}, 3, "finished"),
    ({"stop_condition": "has_final_env_response"}, 3, "finished"),
    ({"stop_condition": "max_turns_reached", "is_truncated": True}, 1, "output_exceeded"),
    ({"stop_condition": "max_total_completion_tokens_reached"}, 3, "output_exceeded"),
    ({"stop_condition": "prompt_too_long", "is_truncated": True}, 3, "context_exceeded"),
    ({"stop_condition": "timeout_reached"}, 3, "timeout"),
    ({"stop_condition": "has_error", "error": vf.EmptyModelResponseError("empty")}, 3, "model_error"),
    ({"stop_condition": "has_error", "error": vf.ToolParseError("bad json")}, 3, "tool_error"),
    ({"stop_condition": "has_error", "error": vf.SandboxError("gone")}, 3, "env_error"),
    ({"stop_condition": "has_error", "error": {"error": "ToolCallError", "error_chain_repr": "x"}}, 3, "tool_error"),
])
def test_stop_conditions_map_to_termination_reasons(state, max_turns, reason):
    assert termination(state, max_turns)[0] == reason


def test_loading_a_verifiers_env_leaves_signal_and_log_handlers_alone(monkeypatch):
    monkeypatch.syspath_prepend(str(ENVS))
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    env = env_class("vf-reverse-words")()
    assert {s: signal.getsignal(s) for s in before} == before
    assert logging.getLogger("verifiers").propagate and not logging.getLogger("verifiers").handlers
    assert env.reward_weights == {"exact": 1.0, "overlap": 0.5, "answer_chars": 0.0, "picky": 0.25, "num_turns": 0.0}
