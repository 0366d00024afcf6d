"""The gateway's record of a model call carries the weights version of each completion token, read from
the engine's `weight_versions` spans (both engines return vLLM's shape)."""

from looprl.gateway.recording import record_call


def body(spans: object, tokens: int = 5) -> dict[str, object]:
    choice = {"index": 0, "finish_reason": "stop", "token_ids": list(range(tokens)),
              "logprobs": {"content": [{"logprob": -0.5}] * tokens}, "weight_versions": spans}
    return {"prompt_token_ids": [1, 2], "choices": [choice], "usage": {"prompt_tokens": 2, "completion_tokens": tokens}}


def versions(spans: object, tokens: int = 5) -> list[int] | None:
    return record_call("r", 0, 0.0, 0.1, 200, body(spans, tokens)).completion_policy_versions


def test_spans_become_one_version_per_token():
    spans = [{"version": "12", "start": 0, "end": 2}, {"version": "13", "start": 2, "end": 3},
             {"version": "14", "start": 3, "end": 5}]
    assert versions(spans) == [12, 12, 13, 14, 14]
    assert versions(list(reversed(spans))) == [12, 12, 13, 14, 14]  # order of the spans does not matter


def test_spans_that_do_not_name_every_token_by_an_integer_version_record_none():
    assert versions(None) is None
    assert versions([{"version": "12", "start": 0, "end": 4}]) is None  # one token left out
    assert versions([{"version": "12", "start": 1, "end": 5}]) is None  # a gap at the start
    assert versions([{"version": "default", "start": 0, "end": 5}]) is None  # a label that is not a step
    assert versions([{"start": 0, "end": 5}]) is None
