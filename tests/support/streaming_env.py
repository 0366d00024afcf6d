"""An env whose own rollout loop calls the model through a streaming OpenAI client, for the real-path tests.

Each rollout asks its question twice on its gateway URL: streamed (`stream=True`, with the usage chunk and
a verifiers-style `X-Session-ID` header), then plain, with the same messages. The transcript holds the
streamed answer; the rewards say whether the two answers' text, finish reason and usage agree, so a test
can also compare the two calls the run stored.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import openai

from looprl.envs import Dataset
from looprl.envs.environment import Environment
from looprl.envs.types import DatasetSplit, GroupRequest, RolloutResult

QUESTIONS = ["What is 2 + 3?", "Name a colour.", "Say hello.", "What is the capital of France?"]


class StreamingEnv(Environment):
    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *,
                             max_examples: int | None = None) -> Dataset:
        return Dataset([{"prompt_messages": [{"role": "user", "content": q}]} for q in QUESTIONS],
                       max_examples=max_examples)

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        return list(await asyncio.gather(*(self._rollout(request, rid) for rid in request.rollout_ids)))

    async def _rollout(self, request: GroupRequest, rollout_id: str) -> RolloutResult:
        started = time.time()
        client = openai.AsyncOpenAI(base_url=request.base_url(rollout_id), api_key="looprl", max_retries=0)
        messages = list(request.example.prompt_messages)
        stream = await client.chat.completions.create(
            model=request.model, messages=messages, stream=True, stream_options={"include_usage": True},  # type: ignore[arg-type]
            extra_headers={"X-Session-ID": rollout_id})
        text, finish, usage = "", None, None
        async for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        plain = await client.chat.completions.create(model=request.model, messages=messages)  # type: ignore[arg-type]
        await client.close()
        same = (text, finish, usage) == (plain.choices[0].message.content, plain.choices[0].finish_reason, plain.usage)
        return RolloutResult(rollout_id=rollout_id, group_id=request.group_id, example_id=request.example.id,
                             split=request.split, messages=[*messages, {"role": "assistant", "content": text}],
                             termination_reason="finished", rewards={"same_answer": float(same)}, turns=2,
                             started_at=started, finished_at=time.time())
