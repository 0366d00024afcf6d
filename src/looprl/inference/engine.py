"""The continuous-batching scheduler: one background thread owns the model.

Requests (and weight updates) enter a thread-safe queue from the server's event loop. Between two
decode steps the scheduler thread admits waiting requests in arrival order: they are prefilled
together (each distinct prompt once, however many sibling requests share it, and a prefix all of them
share once: `batch.prefill`) and their `n` rows
each join the running batch, so a new request never waits for the batch to drain, as long as the
batch's KV cache stays within its budget (`kv_budget`: rows x the longest span a row can reach, at most
`max_kv_tokens`; beyond it requests wait, in order, for rows to finish). Every
step decodes one token for all rows in one forward pass, samples each row with its own parameters,
and retires rows on EOS, a stop string, `max_tokens` or the context limit.

A weight update is ordered like a request: requests that arrived before it finish on the old
weights, admission pauses until the batch drains, the tensors are copied in place, and requests that
arrived after it run on the new weights. No completion then mixes two weight versions. An in-flight
update (`WeightUpdate.in_flight`, the orchestrator's `in_flight_updates`) does not wait for the batch:
it is applied between two decode steps, and the running rows continue on the new weights, their KV
cache as the old weights computed it. Every token records the version that sampled it
(`Completion.versions`), so a completion that spans the swap says which of its tokens came from which
weights.

Everything runs on the model's device (`looprl inference --device`): the batch's cache and mask,
the sampling and the seeded generators; only sampled tokens and logprobs come back to the CPU. On a
CPU, Llama-family models run on `lean_decoder` (fused, prepacked matmuls and a cache that grows in
place), others on their own forward with prepacked linear layers (`packed_linear`); either copies the
new weights on this thread after each weight update (`refresh`).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from looprl.inference.batch import DecodeBatch, TransformersForward, model_forward, prefill
from looprl.inference.kv_budget import KVBudgetExceeded, default_max_kv_tokens
from looprl.inference.token_sampling import LogprobsMode, SamplingParams, sample
from looprl.inference.weight_update import WeightUpdate
from looprl.utils.logger import get_logger

MAX_PREFILL_TOKENS = 8192  # padded prompt tokens per prefill pass: bounds its activation memory


@dataclass
class Completion:
    """One finished choice: generated ids (EOS included), logprobs, text (stop string cut off), and the
    weights version that sampled each token."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    text: str = ""
    finish_reason: str = "length"


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    n: int
    future: asyncio.Future[list[Completion]]
    loop: asyncio.AbstractEventLoop
    completions: list[Completion | None] = field(default_factory=list)
    generator: torch.Generator | None = None
    """The request's own, when it has a seed: its `n` rows draw from it in turn."""


@dataclass
class _Row:
    request: _Request
    index: int
    generator: torch.Generator | None
    span: int
    """The most cache columns this row can reach: its prefill's length plus the tokens it may generate."""
    completion: Completion = field(default_factory=Completion)


class Engine:
    """Owns the model and tokenizer; `generate` and `update_weights` are safe to await concurrently."""

    def __init__(
        self, model: Any, tokenizer: Any, *, max_batch_size: int = 64, logprobs_mode: LogprobsMode = "raw_logprobs",
        threads: int | None = None, max_kv_tokens: int | None = None,
    ) -> None:
        """`threads`: torch's CPU threads on the engine thread (`single_threaded_caller`); None leaves them.
        `max_kv_tokens`: the KV cache's budget; None: `kv_budget.default_max_kv_tokens` (from free memory)."""
        self.model, self.tokenizer, self.threads = model, tokenizer, threads
        self.max_batch_size, self.logprobs_mode = max_batch_size, logprobs_mode
        self.max_kv_tokens = max_kv_tokens or default_max_kv_tokens(model)
        self.max_context = int(model.config.max_position_embeddings)
        eos = model.generation_config.eos_token_id
        self.eos_ids = {tokenizer.eos_token_id, *(eos if isinstance(eos, list) else [eos])} - {None}
        self.weights_version, self.weights_path = 0, str(getattr(model, "name_or_path", ""))
        self._forward = model_forward(model)
        self._inbox: queue.Queue[_Request | WeightUpdate | None] = queue.Queue()
        self._waiting: deque[_Request | WeightUpdate] = deque()
        self._batch, self._rows = DecodeBatch(), list[_Row]()
        self._thread = threading.Thread(target=self._loop, name="looprl-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._inbox.put(None)
        self._thread.join()

    async def generate(self, prompt_ids: list[int], params: SamplingParams, n: int = 1) -> list[Completion]:
        """The `n` completions of one prompt; cancelling the await drops its rows from the batch.
        `KVBudgetExceeded` at once if its rows could never fit in the KV-cache budget."""
        loop = asyncio.get_running_loop()
        request = _Request(prompt_ids, params, n, loop.create_future(), loop, [None] * n)
        new = self._new_tokens(request)
        if n * (len(prompt_ids) + new) > self.max_kv_tokens:
            raise KVBudgetExceeded(
                f"this request needs {n * (len(prompt_ids) + new)} tokens of KV cache ({n} x ({len(prompt_ids)} "
                f"prompt + {new} completion tokens)), more than the engine's whole budget of {self.max_kv_tokens} "
                "(inference.max_kv_tokens, looprl inference --max-kv-tokens)")
        self._inbox.put(request)
        return await request.future

    async def update_weights(self, update: WeightUpdate) -> None:
        """Swap in `update` once every earlier request has finished (in flight: at the next step
        boundary, the running rows continuing on it); returns once it is live."""
        update.future, update.loop = asyncio.get_running_loop().create_future(), asyncio.get_running_loop()
        self._inbox.put(update)
        await update.future

    def _loop(self) -> None:
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        while True:
            idle = not self._rows and not self._waiting
            try:
                item = self._inbox.get(block=idle)
                while True:
                    if item is None:
                        return
                    self._waiting.append(item)
                    item = self._inbox.get_nowait()
            except queue.Empty:
                pass
            try:
                self._admit()
                if self._rows:
                    self._step()
            except Exception as e:  # a failed forward pass fails the requests in it, not the server
                get_logger().exception("engine step failed")
                for row in self._rows:
                    _resolve(row.request, error=e)
                self._rows, self._batch = [], DecodeBatch()

    def _admit(self) -> None:
        """Admit waiting requests in order while they fit, prefill them in groups, join the batch."""
        admitted = self._admissible()
        for group in _prefill_groups(_same_prompts(admitted)):
            requests = [r for same in group for r in same]  # the order of `prefill`'s rows
            try:
                new = prefill(self._forward, [same[0].prompt_ids for same in group],
                              [sum(r.n for r in same) for same in group], self.model.device)
            except Exception as e:  # these prompts failed; the running batch is untouched
                get_logger().exception("prefill failed")
                for request in requests:
                    _resolve(request, error=e)
                continue
            length = max(len(same[0].prompt_ids) for same in group)  # the prefill's, whatever its shared prefix
            new_rows = [_Row(request, i, request.generator, length + self._new_tokens(request))
                        for request in requests for i in range(request.n)]
            self._rows.extend(new_rows)  # first: if joining the batch fails, `_loop` fails these requests too
            self._batch.add(new)
            self._advance(new_rows, new.logits)

    def _admissible(self) -> list[_Request]:
        """The waiting requests that fit now, in order, taken off the queue (a weight update first drains
        the batch, then is applied; an in-flight one is applied at once).

        A request fits if the batch's rows stay within `max_batch_size` and its KV cache within
        `max_kv_tokens`: all rows times the longest span any row can reach. A new row's prefill is no
        longer than the longest prompt admitted with it, so that bounds its span here.
        """
        admitted: list[_Request] = []
        rows = len(self._rows)
        longest_span = max((row.span for row in self._rows), default=0)
        longest_prompt = most_tokens = 0  # over the requests admitted in this call
        while self._waiting:
            head = self._waiting[0]
            if isinstance(head, WeightUpdate):
                if rows and not head.in_flight:
                    break  # drain first: everything admitted so far runs on the old weights
                self._waiting.popleft()
                self._apply(head)
                continue
            if head.future.done():  # cancelled while waiting
                self._waiting.popleft()
                continue
            if rows and rows + head.n > self.max_batch_size:
                break
            prompt, tokens = max(longest_prompt, len(head.prompt_ids)), max(most_tokens, self._new_tokens(head))
            if rows and (rows + head.n) * max(longest_span, prompt + tokens) > self.max_kv_tokens:
                break
            self._waiting.popleft()
            try:
                head.generator = _generator(head.params.seed, self.model.device)
            except ValueError as e:  # this request's own fault: it fails alone, before it joins the batch
                _resolve(head, error=e)
                continue
            admitted.append(head)
            rows += head.n
            longest_prompt, most_tokens = prompt, tokens
        return admitted

    def _step(self) -> None:
        inputs = [row.completion.token_ids[-1] for row in self._rows]
        positions = [len(row.request.prompt_ids) + len(row.completion.token_ids) - 1 for row in self._rows]
        self._advance(self._rows, self._batch.decode(self._forward, inputs, positions))

    def _advance(self, rows: list[_Row], logits: torch.Tensor) -> None:
        """Sample one token for each of `rows`, then retire every finished or cancelled row."""
        sampled = sample(logits, [r.request.params for r in rows], [r.generator for r in rows], self.logprobs_mode)
        for row, token, logprob, top in zip(rows, sampled.tokens, sampled.logprobs, sampled.top):
            completion = row.completion
            completion.token_ids.append(token)
            completion.logprobs.append(logprob)
            completion.versions.append(self.weights_version)
            completion.top_logprobs.append(top)
            if token in self.eos_ids or self._stop_at(row) is not None:
                completion.finish_reason = "stop"
        keep = []
        for position, row in enumerate(self._rows):
            if row.request.future.done():
                continue
            if row.completion.finish_reason == "stop" or self._out_of_budget(row):
                text = self.tokenizer.decode(row.completion.token_ids, skip_special_tokens=True)
                row.completion.text = text[: self._stop_at(row)]
                row.request.completions[row.index] = row.completion
                if all(c is not None for c in row.request.completions):
                    _resolve(row.request)
            else:
                keep.append(position)
        if len(keep) < len(self._rows):
            self._rows = [self._rows[i] for i in keep]
            self._batch.keep(keep)

    def _stop_at(self, row: _Row) -> int | None:
        """Where the first stop string starts in the row's text, if one has been generated."""
        if not row.request.params.stop:
            return None
        text = self.tokenizer.decode(row.completion.token_ids, skip_special_tokens=True)
        cuts = [i for i in (text.find(s) for s in row.request.params.stop) if i >= 0]
        return min(cuts) if cuts else None

    def _new_tokens(self, request: _Request) -> int:
        """The most tokens a row of `request` may generate (`max_tokens`, or up to the context limit)."""
        return max(1, min(request.params.max_tokens, self.max_context - len(request.prompt_ids)))

    def _out_of_budget(self, row: _Row) -> bool:
        generated = len(row.completion.token_ids)
        return generated >= row.request.params.max_tokens or len(row.request.prompt_ids) + generated >= self.max_context

    def _apply(self, update: WeightUpdate) -> None:
        try:
            update.apply(self.model)
            try:
                self._forward.refresh()
            except Exception:  # the copies are stale: serve the model's own weights (slower, never stale)
                self._forward = TransformersForward(self.model, pack=False)
                raise
            self.weights_version = update.version if update.version is not None else self.weights_version + 1
            self.weights_path = str(update.path)
            get_logger().info("loaded weights version {} from {}", self.weights_version, update.path)
            update.loop.call_soon_threadsafe(_set_result, update.future, None)
        except Exception as e:
            update.loop.call_soon_threadsafe(_set_exception, update.future, e)


def single_threaded_caller() -> int:
    """Keep the calling (main) thread's torch ops on one CPU thread and return the count it had, for the
    engine thread (`Engine(threads=...)`). Call it before the process runs any torch op.

    OpenMP gives each thread that runs a parallel op a team of its own. Once the main thread has one
    (loading the model runs parallel ops), the engine thread's team ran every decode step 15-25 % slower
    on 2 CPU cores (SmolLM2, one row: 42 against 34 ms a step): with more OpenMP threads than cores,
    libgomp lets idle threads spin for less, so each of a step's ~120 matmuls waits to wake its
    worker. Kept on one thread, the main thread never makes a team, and the engine thread's team runs
    as fast as it does in a process that has no other.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    return threads


def _generator(seed: int | None, device: torch.device) -> torch.Generator | None:
    """A generator seeded with `seed` on `device` (None without a seed); ValueError for a seed torch cannot take."""
    if seed is None:
        return None
    try:
        return torch.Generator(device).manual_seed(seed)
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"seed {seed} is outside the range a torch.Generator accepts ({e})") from e


def _same_prompts(requests: list[_Request]) -> list[list[_Request]]:
    """Requests grouped by identical prompt, in arrival order of each prompt's first request.

    A GRPO group's siblings arrive as separate requests with the same prompt: each prompt is
    prefilled once and its cache copied into every sibling's rows (on the CPU demo, 4 prompts
    instead of 32 cut a 3.9 s prefill to 0.7 s).
    """
    by_prompt: dict[tuple[int, ...], list[_Request]] = {}
    for request in requests:
        by_prompt.setdefault(tuple(request.prompt_ids), []).append(request)
    return list(by_prompt.values())


def _prefill_groups(prompts: list[list[_Request]]) -> list[list[list[_Request]]]:
    """Consecutive distinct prompts grouped so that each left-padded prefill stays under MAX_PREFILL_TOKENS."""
    groups: list[list[list[_Request]]] = []
    longest = 0
    for same in prompts:
        length = len(same[0].prompt_ids)
        longest_with = max(longest, length)
        if groups and longest_with * (len(groups[-1]) + 1) <= MAX_PREFILL_TOKENS:
            groups[-1].append(same)
            longest = longest_with
        else:
            groups.append([same])
            longest = length
    return groups


def _resolve(request: _Request, error: Exception | None = None) -> None:
    if error is not None:
        request.loop.call_soon_threadsafe(_set_exception, request.future, error)
    else:
        request.loop.call_soon_threadsafe(_set_result, request.future, list(request.completions))


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], error: Exception) -> None:
    if not future.done():
        future.set_exception(error)

