"""A scripted OpenAI-compatible server: the test double for an inference engine.

`ScriptedServer(reply)` serves `POST /v1/chat/completions` on a free local port in a background
thread; `reply(body) -> Reply` decides each answer from the request. Responses carry vLLM's token
extensions (`prompt_token_ids`, `choices[].token_ids`, `choices[].logprobs.content`) unless
`vllm_fields=False`, so the gateway's recording is exercised both ways. A request with `stream: true` is
answered as server-sent events, as the gateway streams (`looprl.utils.chat_stream`), so streaming
clients (verifiers' `vf-eval`) can be pointed at it directly.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request

from looprl.utils.chat_stream import Answers, JSONAnswer, stream_answer, stream_request


@dataclass
class Reply:
    content: str = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    """(name, arguments) pairs; arguments that are not a str are JSON-encoded."""
    finish_reason: str | None = None
    status: int = 200
    error: dict[str, Any] | None = None


async def _ready(answer: JSONAnswer) -> JSONAnswer:
    return answer


def _tokens(text: str) -> list[int]:
    return [ord(c) % 997 for c in text]


class ScriptedServer:
    def __init__(self, reply: Callable[[dict[str, Any]], Reply], *, vllm_fields: bool = True, delay_s: float = 0.0):
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        """Each request's `Authorization` header (None when it had none), in order."""
        self.vllm_fields = vllm_fields
        self.delay_s = delay_s
        self._answers = Answers()
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            self.requests.append(body)
            self.authorizations.append(request.headers.get("authorization"))
            if self.delay_s:
                import asyncio

                await asyncio.sleep(self.delay_s)
            r = self.reply(body)
            if r.status != 200:
                answer = JSONAnswer({"error": r.error or {"message": "scripted error", "type": "x", "code": None}},
                                    status_code=r.status)
            else:
                answer = JSONAnswer(self._response(body, r))
            stream, include_usage = stream_request(body)
            return await stream_answer(self._answers.start(_ready(answer)), include_usage) if stream else answer

        self.app = app

    def _response(self, body: dict[str, Any], r: Reply) -> dict[str, Any]:
        prompt_ids = _tokens(json.dumps(body["messages"]))
        completion_ids = _tokens(r.content) or [0]
        message: dict[str, Any] = {"role": "assistant", "content": r.content}
        if r.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for i, (name, args) in enumerate(r.tool_calls)]
        finish = r.finish_reason or ("tool_calls" if r.tool_calls else "stop")
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        out: dict[str, Any] = {"id": "cmpl", "object": "chat.completion", "created": int(time.time()),
                               "model": body.get("model", "scripted"), "choices": [choice],
                               "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion_ids),
                                         "total_tokens": len(prompt_ids) + len(completion_ids)}}
        if self.vllm_fields:
            out["prompt_token_ids"] = prompt_ids
            choice["token_ids"] = completion_ids
            choice["logprobs"] = {"content": [{"token": str(t), "logprob": -0.5, "bytes": None, "top_logprobs": []}
                                              for t in completion_ids]}
        return out

    def __enter__(self) -> ScriptedServer:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)
        self._sock = sock
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc: Any) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
