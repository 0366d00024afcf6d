"""The model's recorded replies served back in order: the stand-in for the engine in `looprl replay`.

A stored rollout keeps its transcript and, per model call, the status and finish reason the gateway
recorded. Call k of the replay gets the k-th recorded answer (the k-th assistant message of the
transcript, or the recorded error, so a `context_exceeded` ends the same way), on the same
per-rollout URL shape as the gateway (`/sessions/{rollout_id}/v1`), streamed to a client that asks for a
stream as the gateway streams. Each request's messages are
compared with what the recorded call was sent; the first call that differs, or a call the recording
lacks (answered with HTTP 409), is where the replay diverged.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from looprl.envs.types import Message
from looprl.gateway.app import error_response
from looprl.store.records import ModelCall, RolloutRecord
from looprl.utils.chat_stream import HEADERS, MEDIA_TYPE, stream_body, stream_request

CONTEXT_ERRORS = ("context_budget_exceeded", "context_length_exceeded")


@dataclass
class RecordedCall:
    """One model call as stored: the messages it was sent and what came back."""

    messages: list[Message]
    reply: Message | None
    """The assistant message, or None for a call that failed."""
    finish_reason: str | None = None
    status: int = 200
    error: str | None = None


@dataclass
class Recording:
    """One rollout's model calls, replayed in order; `divergence` says where the replay left them."""

    calls: list[RecordedCall]
    served: int = 0
    divergence: str | None = None


def recorded_calls(record: RolloutRecord) -> list[RecordedCall]:
    """The rollout's calls in order, each paired with the transcript prefix it was sent and its answer."""
    turns = [i for i, m in enumerate(record.messages) if m.get("role") == "assistant"]
    calls, next_turn = [], iter(turns)
    recorded: Sequence[ModelCall | None] = record.model_calls or [None] * len(turns)
    for call in recorded:
        if call is not None and call.status != 200:
            calls.append(RecordedCall(record.messages, None, status=call.status, error=call.error))
            break  # a failed call ends the rollout
        i = next(next_turn, None)
        if i is None:
            break
        reply = record.messages[i]
        finish = call.finish_reason if call else None
        calls.append(RecordedCall(record.messages[:i], reply,
                                  finish or ("tool_calls" if reply.get("tool_calls") else "stop")))
    return calls


def _normalized(message: Message) -> Message:
    """The message without what OpenAI clients spell differently and mean the same by: a key that is null (or
    left out), a streamed tool call's `index` (verifiers' harnesses send both shapes)."""
    out = {k: v for k, v in message.items() if v is not None}
    if isinstance(out.get("tool_calls"), list):
        out["tool_calls"] = [{k: v for k, v in call.items() if k != "index"} if isinstance(call, dict) else call
                             for call in out["tool_calls"]]
    return out


def _same(sent: list[Message], recorded: list[Message]) -> bool:
    return len(sent) == len(recorded) and all(_normalized(a) == _normalized(b) for a, b in zip(sent, recorded))


def _first_difference(sent: list[Message], recorded: list[Message]) -> int:
    for i, (a, b) in enumerate(zip(sent, recorded)):
        if _normalized(a) != _normalized(b):
            return i
    return min(len(sent), len(recorded))


@dataclass
class ReplayServer:
    """Serves each rollout's recording on a local port from a background thread (the foreground stays
    free for the env's code, and for pdb)."""

    recordings: dict[str, Recording]
    model: str = "replay"
    _server: uvicorn.Server | None = field(default=None, init=False)

    def answer(self, rollout_id: str, body: dict[str, Any]) -> JSONResponse | dict[str, Any]:
        recording = self.recordings.get(rollout_id)
        if recording is None:
            return error_response(404, f"replay: no recording of rollout {rollout_id}", "unknown_rollout")
        turn = recording.served + 1
        if recording.served >= len(recording.calls):
            recording.divergence = recording.divergence or (
                f"turn {turn}: the env made a model call the recording lacks "
                f"(it has {len(recording.calls)})")
            return error_response(409, f"replay: the recording has only {len(recording.calls)} model calls",
                                  "replay_exhausted")
        call = recording.calls[recording.served]
        recording.served += 1
        sent = body.get("messages") or []
        if not _same(sent, call.messages) and recording.divergence is None:
            at = _first_difference(sent, call.messages)
            recording.divergence = (f"turn {turn}: the request's message {at} differs from the recorded one "
                                    f"({len(sent)} messages sent, {len(call.messages)} recorded); "
                                    "the recorded reply was served anyway")
        if call.reply is None:
            code = call.error if call.error in CONTEXT_ERRORS else "replayed_error"
            return error_response(call.status, call.error or f"HTTP {call.status}", code)
        return {"id": f"replay-{rollout_id}-{turn}", "object": "chat.completion", "created": int(time.time()),
                "model": self.model,
                "choices": [{"index": 0, "message": call.reply, "finish_reason": call.finish_reason}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/sessions/{rollout_id}/v1/chat/completions")
        async def chat(rollout_id: str, request: Request) -> Any:
            body = await request.json()
            answer = self.answer(rollout_id, body)
            stream, include_usage = stream_request(body)
            if stream and isinstance(answer, dict):  # a client that streams (verifiers' harnesses always do)
                return Response(stream_body(answer, include_usage), media_type=MEDIA_TYPE, headers=HEADERS)
            return answer

        return app

    def __enter__(self) -> str:
        """Start serving; returns the per-rollout base URL template."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._server = uvicorn.Server(uvicorn.Config(self._app(), log_level="warning", access_log=False,
                                                     lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="looprl-replay", daemon=True)
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            time.sleep(0.01)
        return f"http://127.0.0.1:{sock.getsockname()[1]}/sessions/{{rollout_id}}/v1"

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.should_exit = True
        self._thread.join(timeout=10)
