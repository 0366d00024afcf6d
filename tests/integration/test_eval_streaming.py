"""`looprl eval` of an env that calls the model through a streaming OpenAI client: every streamed call is
stored with the token ids and logprobs a plain call stores."""

import json

from tests.support.cli import looprl
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.store.reader import RunStoreReader

RECORD_FIELDS = ("status", "finish_reason", "prompt_tokens", "completion_tokens", "prompt_token_ids",
                 "completion_token_ids", "completion_logprobs", "error")


def test_streamed_calls_are_stored_as_plain_calls_are(tmp_path):
    out = tmp_path / "run"
    with ScriptedServer(lambda body: Reply(f"you asked: {body['messages'][-1]['content']}")) as server:
        looprl("eval", "tests/support/streaming_env.py:StreamingEnv", "--base-url", server.base_url,
               "-n", "3", "-r", "2", "--output", str(out))
    assert len(server.requests) == 12 and not any("stream" in r for r in server.requests)
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--json").stdout.splitlines()]
    assert len(rows) == 6 and all(r["rewards"] == {"same_answer": 1.0} for r in rows)
    reader = RunStoreReader(out)
    for row in rows:
        streamed, plain = reader.model_calls(row["rollout_id"])
        assert streamed.completion_token_ids and streamed.completion_logprobs and streamed.prompt_token_ids
        assert all(getattr(streamed, f) == getattr(plain, f) for f in RECORD_FIELDS)
        assert row["messages"][-1]["content"] == f"you asked: {row['messages'][0]['content']}"
