"""The stream helper both looprl servers share: one rule for the stream fields, answers rendered from their
parsed JSON, and answer tasks that are never lost (failures logged, cancelled when the server stops)."""

import asyncio
import io

import pytest
from pydantic import ValidationError

from looprl.inference.protocol import ChatCompletionRequest
from looprl.utils import chat_stream
from looprl.utils.chat_stream import Answers, JSONAnswer, StreamRequestError, stream_answer, stream_request
from looprl.utils.logger import reset_logger, setup_logger

COMPLETION = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}


@pytest.mark.parametrize(("fields", "accepted"), [
    ({}, (False, False)),
    ({"stream": None, "stream_options": None}, (False, False)),
    ({"stream": True, "stream_options": {"include_usage": None}}, (True, False)),
    ({"stream": True, "stream_options": {"include_usage": True, "other": 1}}, (True, True)),
    ({"stream": True, "stream_options": {"include_usage": "true"}}, None),
    ({"stream": True, "stream_options": {"include_usage": 1}}, None),
    ({"stream": "yes"}, None),
    ({"stream": True, "stream_options": "usage"}, None),
])
def test_the_gateway_and_the_engine_accept_the_same_stream_fields(fields, accepted):
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], **fields}
    if accepted is None:
        with pytest.raises(StreamRequestError):
            stream_request(body)
        with pytest.raises(ValidationError):
            ChatCompletionRequest.model_validate(body)
    else:
        request = ChatCompletionRequest.model_validate(body)
        assert stream_request(body) == accepted == (bool(request.stream), request.include_usage)


async def test_a_streamed_answer_is_rendered_from_its_parsed_json_not_its_bytes():
    answers = Answers()
    answer = JSONAnswer(COMPLETION, body=b"bytes the stream never parses")

    async def ready() -> JSONAnswer:
        return answer

    response = await stream_answer(answers.start(ready()), include_usage=False)
    assert answer.body == b"bytes the stream never parses"
    assert response.body == chat_stream.stream_body(COMPLETION, include_usage=False)


async def test_an_answer_that_fails_with_no_client_left_is_logged():
    sink = io.StringIO()
    setup_logger("info", sink=sink)
    try:
        async def fails() -> JSONAnswer:
            raise RuntimeError("engine went away")

        task = Answers().start(fails())
        await asyncio.wait({task})
        await asyncio.sleep(0)
    finally:
        reset_logger()
    assert "an answer failed: RuntimeError: engine went away" in sink.getvalue()


async def test_cancel_ends_the_answers_in_progress():
    answers = Answers()
    task = answers.start(asyncio.sleep(3600))  # type: ignore[arg-type]
    await answers.cancel()
    assert task.cancelled() and len(answers) == 0
