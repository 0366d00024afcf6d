"""The replay server: recorded replies in order, errors as recorded, and where a replay diverged."""

import time

from looprl.commands.replay.recorded_replies import Recording, ReplayServer, recorded_calls
from looprl.store.records import ModelCall, RolloutRecord

PROMPT = [{"role": "user", "content": "compute 1+1"}]
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "c0", "type": "function", "function": {"name": "calc", "arguments": '{"e": "1+1"}'}}]}
TOOL = {"role": "tool", "tool_call_id": "c0", "content": "2"}
ANSWER = {"role": "assistant", "content": "<answer>2</answer>"}


def stored(calls=None, messages=None) -> RolloutRecord:
    return RolloutRecord(rollout_id="r1", group_id="g", example_id="e", split="eval",
                         messages=messages or [*PROMPT, CALL, TOOL, ANSWER], termination_reason="finished",
                         started_at=time.time(), finished_at=time.time(), run_id="run", env_name="Env",
                         model_calls=calls or [])


def call(idx, **kw) -> ModelCall:
    return ModelCall(rollout_id="r1", idx=idx, started_at=0, latency_s=0, **kw)


def test_calls_pair_each_reply_with_the_transcript_it_was_sent():
    calls = recorded_calls(stored([call(0, finish_reason="tool_calls"), call(1, finish_reason="length")]))
    assert [c.messages for c in calls] == [PROMPT, [*PROMPT, CALL, TOOL]]
    assert [c.reply for c in calls] == [CALL, ANSWER] and calls[1].finish_reason == "length"
    # a run without recorded calls: the transcript's assistant turns, finish reasons inferred
    assert [c.finish_reason for c in recorded_calls(stored())] == ["tool_calls", "stop"]


def test_a_failed_call_is_replayed_as_its_error():
    calls = recorded_calls(stored([call(0, status=400, error="context_budget_exceeded")], messages=PROMPT))
    server = ReplayServer({"r1": Recording(calls)})
    response = server.answer("r1", {"messages": PROMPT})
    assert response.status_code == 400 and b"context_budget_exceeded" in response.body


def test_divergence_is_the_first_call_that_differs_or_is_missing():
    server = ReplayServer({"r1": Recording(recorded_calls(stored()))})
    first = server.answer("r1", {"messages": PROMPT})
    assert first["choices"][0]["message"] == CALL and server.recordings["r1"].divergence is None
    second = server.answer("r1", {"messages": [*PROMPT, CALL, {**TOOL, "content": "3"}]})
    assert second["choices"][0]["message"] == ANSWER  # served anyway, so the rollout can end
    assert server.recordings["r1"].divergence.startswith("turn 2: the request's message 2 differs")
    extra = server.answer("r1", {"messages": PROMPT})
    assert extra.status_code == 409
    fresh = ReplayServer({"r1": Recording(recorded_calls(stored()))})
    for messages in (PROMPT, [*PROMPT, CALL, TOOL], PROMPT):
        fresh.answer("r1", {"messages": messages})
    assert fresh.recordings["r1"].divergence.startswith("turn 3: the env made a model call the recording lacks")
