"""Generation throughput: the embedded engine and vLLM (servers) against plain batched `model.generate`.

For 1, 8 and 32 concurrent requests, the same chat prompts and the same sampling settings
(temperature 1, `--max-tokens` new tokens, stop at EOS) go through each server (started as `looprl
rl` starts it, requests sent concurrently over HTTP) and through one left-padded `model.generate`
call in this process. Tokens/s counts generated tokens (EOS included) over wall time, prefill
included. One server runs at a time, and `generate` runs right after each server's measurement, so
the ratios compare runs under the same machine load. vLLM runs from `inference.vllm_python`'s
default (`.venv-vllm` on CPU, `make vllm`); `--backends embedded` leaves it out. With `--repeats N` each
concurrency runs N times per server: the table gives the median [min-max] of the rates and of the ratios
(each ratio from one run's pair; embedded / vllm pairs the two servers' runs in order).

    .venv/bin/python bench/generation.py [--model smollm2-135m-instruct] [--max-tokens 64] [--repeats 3]
                                         [--backends embedded vllm]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx
import torch
from rich.console import Console
from rich.table import Table

from looprl.config import InferenceConfig
from looprl.inference.backends import engine_process
from looprl.inference.process import EngineProcess
from looprl.model_loading import DEFAULT_MODEL, load_model_and_tokenizer

TOPICS = ["the sea", "a lighthouse", "coffee", "trains", "a lost key", "winter", "a robot", "the moon",
          "bees", "a library", "rain", "chess", "a volcano", "bread", "a violin", "the desert"]
PROMPTS = [f"Write a short story about {t}." if i % 2 == 0 else f"Explain {t} to a child in three sentences."
           for t in TOPICS for i in range(2)]
CONCURRENCY = (1, 8, 32)


async def server_run(engine: EngineProcess, prompts: list[str], max_tokens: int) -> tuple[int, float]:
    async def one(client: httpx.AsyncClient, prompt: str) -> int:
        body = {"model": engine.model_name, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "temperature": 1.0}
        response = await client.post(f"{engine.base_url}/chat/completions", json=body)
        response.raise_for_status()
        return int(response.json()["usage"]["completion_tokens"])

    async with httpx.AsyncClient(timeout=None) as client:
        start = time.perf_counter()
        counts = await asyncio.gather(*(one(client, p) for p in prompts))
        return sum(counts), time.perf_counter() - start


def generate_run(model, tokenizer, prompts: list[str], max_tokens: int) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
             for p in prompts]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=max_tokens, do_sample=True, temperature=1.0, top_p=1.0, top_k=0)
    elapsed = time.perf_counter() - start
    eos = model.generation_config.eos_token_id
    tokens = 0
    for row in out[:, batch["input_ids"].shape[1]:].tolist():
        tokens += row.index(eos) + 1 if eos in row else len(row)
    return tokens, elapsed


async def bench(model_name: str, max_tokens: int, backend: str, model, tokenizer,  # type: ignore[no-untyped-def]
                repeats: int) -> dict[int, list[tuple[float, float]]]:
    """Per concurrency, `repeats` (server tokens/s, generate tokens/s) pairs for `backend`, each pair measured
    back to back."""
    rates: dict[int, list[tuple[float, float]]] = {c: [] for c in CONCURRENCY}
    async with engine_process(InferenceConfig(backend=backend), model_name) as engine:  # type: ignore[arg-type]
        await server_run(engine, PROMPTS[:2], 8)  # warm-up
        for _ in range(repeats):
            for c in CONCURRENCY:
                server_tokens, server_s = await server_run(engine, PROMPTS[:c], max_tokens)
                generate_tokens, generate_s = generate_run(model, tokenizer, PROMPTS[:c], max_tokens)
                rates[c].append((server_tokens / server_s, generate_tokens / generate_s))
    return rates


def spread(values: list[float], unit: str = "") -> str:
    """The median, and [min-max] when there are several runs."""
    median = statistics.median(values)
    text = f"{median:.2f}{unit}" if unit else f"{median:.1f}"
    if len(values) > 1:
        low, high = min(values), max(values)
        text += f" [{low:.2f}-{high:.2f}]" if unit else f" [{low:.1f}-{high:.1f}]"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--backends", nargs="+", choices=["embedded", "vllm"], default=["embedded", "vllm"])
    parser.add_argument("--repeats", type=int, default=1, help="runs per concurrency: the median [min-max]")
    args = parser.parse_args()

    model, tokenizer = load_model_and_tokenizer(args.model)
    generate_run(model, tokenizer, PROMPTS[:2], 8)  # warm-up
    results = {b: asyncio.run(bench(args.model, args.max_tokens, b, model, tokenizer, args.repeats))
               for b in args.backends}
    both = len(args.backends) == 2
    table = Table(title=f"{args.model}: tokens/s, max_tokens={args.max_tokens}, "
                        f"{torch.get_num_threads()} torch threads, median \\[min-max] of {args.repeats}")
    for column in ("concurrent", *(f"{b} tok/s" for b in args.backends), "generate tok/s",
                   *(f"{b} / generate" for b in args.backends), *(["embedded / vllm"] if both else [])):
        table.add_column(column, justify="right")
    for c in CONCURRENCY:
        server = {b: [s for s, _ in results[b][c]] for b in args.backends}
        generate = [g for b in args.backends for _, g in results[b][c]]
        cells = [str(c), *(spread(server[b]) for b in args.backends), spread(generate),
                 *(spread([s / g for s, g in results[b][c]], "x") for b in args.backends)]
        if both:
            cells.append(spread([e / v for e, v in zip(server["embedded"], server["vllm"])], "x"))
        table.add_row(*cells)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
