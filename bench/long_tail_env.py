"""A task with long-tailed reply lengths, for `bench/in_flight.py` and the in-flight weight update tests.

One example in `LONG_EVERY` asks for a story and may run to `LONG_TOKENS` tokens; the others may take
`SHORT_TOKENS` (8x fewer). The model is not trusted to be brief (the untrained SmolLM2 answers an
addition with a paragraph): the env owns its loop (`Environment`) and sends each example's limit as the
request's `max_tokens`, which the gateway keeps when below the run's. So a tenth of the rollouts cost 8x
the tokens, as the long multi-turn or tool rollouts of an agentic run do, whatever the policy learns.
`score` rewards the right sum, and a story of at least `STORY_WORDS` words.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from pathlib import Path

import openai

from looprl.envs import Dataset, DatasetSplit, Environment
from looprl.envs.types import GroupRequest, RolloutResult

TOPICS = ("dragon", "lighthouse", "robot", "river", "violin", "desert", "clock", "garden", "comet", "bakery")
SHORT_TOKENS, LONG_TOKENS = 12, 96
STORY_WORDS = 40
_NUMBER = re.compile(r"-?\d+")


class LongTailEnv(Environment):
    LONG_EVERY = 10
    """One example in this many is a long story."""
    LONG_TOKENS = LONG_TOKENS

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None) -> Dataset:
        pairs = [(a, b) for a in range(10) for b in range(10)]
        part = pairs[::5] if split == "eval" else [p for i, p in enumerate(pairs) if i % 5]
        return Dataset([self.example(i, a, b) for i, (a, b) in enumerate(part)], max_examples=max_examples,
                       source=f"long-tail {split}")

    def example(self, i: int, a: int, b: int) -> dict[str, object]:
        if i % self.LONG_EVERY == 0:
            topic = TOPICS[(i // self.LONG_EVERY) % len(TOPICS)]
            return {"prompt_messages": [{"role": "user", "content": f"Tell me a long story about a {topic}."}],
                    "kind": "story", "max_tokens": self.LONG_TOKENS}
        return {"prompt_messages": [{"role": "system", "content": "Reply with just the number."},
                                    {"role": "user", "content": f"What is {a} + {b}?"}],
                "kind": "sum", "answer": a + b, "max_tokens": SHORT_TOKENS}

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        return list(await asyncio.gather(*(self.roll_out(request, r) for r in request.rollout_ids)))

    async def roll_out(self, request: GroupRequest, rollout_id: str, max_tokens: int | None = None) -> RolloutResult:
        """One reply of at most `max_tokens` (None: the example's)."""
        args = request.example.example_args
        messages = [dict(m) for m in request.example.prompt_messages]
        started = time.time()
        async with openai.AsyncOpenAI(base_url=request.base_url(rollout_id), api_key="looprl", max_retries=0) as client:
            try:
                response = await client.chat.completions.create(model=request.model, messages=messages,
                                                                max_tokens=max_tokens or args["max_tokens"])
            except openai.APIError as e:
                return self.result(request, rollout_id, messages, started, "model_error", error=str(e))
        choice = response.choices[0]
        reply = choice.message.content or ""
        messages.append({"role": "assistant", "content": reply})
        reason = "output_exceeded" if choice.finish_reason == "length" else "finished"
        return self.result(request, rollout_id, messages, started, reason, self.score(reply, args))

    @staticmethod
    def score(reply: str, args: dict[str, object]) -> dict[str, float]:
        if args["kind"] == "story":
            return {"score": float(len(reply.split()) >= STORY_WORDS)}
        first = _NUMBER.search(reply)
        return {"score": float(first is not None and int(first.group()) == args["answer"])}

    @staticmethod
    def result(request: GroupRequest, rollout_id: str, messages: list, started: float, reason: str,
               rewards: dict[str, float] | None = None, error: str | None = None) -> RolloutResult:
        return RolloutResult(rollout_id=rollout_id, group_id=request.group_id, example_id=request.example.id,
                             split=request.split, messages=messages, example_args=request.example.example_args,
                             termination_reason=reason, error=error, rewards=rewards or {}, turns=1,
                             started_at=started, finished_at=time.time())


class StoriesEnv(LongTailEnv):
    """Stories only, scoring 1, their groups alternately short (`SHORT_TOKENS`) and long (`LONG_TOKENS`) in the
    order they start: the in-flight weight update tests' task (the run's `max_tokens` must allow `LONG_TOKENS`).

    A reply spans a weight update only if it is generating when the update lands. No group has a signal, so the
    trainer trains nothing and republishes its weights as the next version a moment after each batch; the
    orchestrator keeps the next step's groups running beside the step's, and of any two started one after the
    other one is long, so a long story is still running when the step's short ones complete its batch (the order is
    each env worker's own: with the default of one worker, the run's). Left to the
    dataset's shuffled order and the trainer's speed, groups finished together and the updates landed between
    replies (CI: no reply spanned an update, twice)."""

    LONG_EVERY = 1
    LONG_TOKENS = 192

    def __init__(self) -> None:
        self.started = itertools.count()

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        max_tokens = self.LONG_TOKENS if next(self.started) % 2 else SHORT_TOKENS
        return list(await asyncio.gather(*(self.roll_out(request, r, max_tokens) for r in request.rollout_ids)))

    @staticmethod
    def score(reply: str, args: dict[str, object]) -> dict[str, float]:
        return {"score": 1.0}
