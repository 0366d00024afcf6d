"""Generation throughput: the embedded engine server against plain batched `model.generate`.

For 1, 8 and 32 concurrent requests, the same chat prompts and the same sampling settings
(temperature 1, `--max-tokens` new tokens, stop at EOS) go once through the server (an
`EngineProcess`, requests sent concurrently over HTTP) and once through one left-padded
`model.generate` call in this process. Tokens/s counts generated tokens (EOS included) over wall
time, prefill included. The two run back to back for each concurrency (never at the same time), so
they see the same machine load.

    .venv/bin/python bench/generation.py [--model smollm2-135m-instruct] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx
import torch
from rich.console import Console
from rich.table import Table

from looprl.inference.process import EngineProcess
from looprl.models import DEFAULT_MODEL, load_model_and_tokenizer

TOPICS = ["the sea", "a lighthouse", "coffee", "trains", "a lost key", "winter", "a robot", "the moon",
          "bees", "a library", "rain", "chess", "a volcano", "bread", "a violin", "the desert"]
PROMPTS = [f"Write a short story about {t}." if i % 2 == 0 else f"Explain {t} to a child in three sentences." for t in TOPICS for i in range(2)]
CONCURRENCY = (1, 8, 32)


async def server_run(engine: EngineProcess, prompts: list[str], max_tokens: int) -> tuple[int, float]:
    async def one(client: httpx.AsyncClient, prompt: str) -> int:
        body = {"model": engine.model_name, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 1.0}
        response = await client.post(f"{engine.base_url}/chat/completions", json=body)
        response.raise_for_status()
        return int(response.json()["usage"]["completion_tokens"])

    async with httpx.AsyncClient(timeout=None) as client:
        start = time.perf_counter()
        counts = await asyncio.gather(*(one(client, p) for p in prompts))
        return sum(counts), time.perf_counter() - start


def generate_run(model, tokenizer, prompts: list[str], max_tokens: int) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True) for p in prompts]
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


async def bench(model_name: str, max_tokens: int) -> list[tuple[int, int, float, int, float]]:
    """(concurrency, server tokens, server seconds, generate tokens, generate seconds) rows."""
    model, tokenizer = load_model_and_tokenizer(model_name)
    generate_run(model, tokenizer, PROMPTS[:2], 8)  # warm-up
    rows = []
    async with EngineProcess(model_name) as engine:
        await server_run(engine, PROMPTS[:2], 8)  # warm-up
        for c in CONCURRENCY:
            server_tokens, server_s = await server_run(engine, PROMPTS[:c], max_tokens)
            generate_tokens, generate_s = generate_run(model, tokenizer, PROMPTS[:c], max_tokens)
            rows.append((c, server_tokens, server_s, generate_tokens, generate_s))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    rows = asyncio.run(bench(args.model, args.max_tokens))
    table = Table(title=f"{args.model}: tokens/s, max_tokens={args.max_tokens}, {torch.get_num_threads()} torch threads")
    for column in ("concurrent", "server tokens / s", "server tok/s", "generate tokens / s", "generate tok/s", "ratio"):
        table.add_column(column, justify="right")
    for c, st, ss, gt, gs in rows:
        table.add_row(str(c), f"{st} / {ss:.1f}", f"{st / ss:.1f}", f"{gt} / {gs:.1f}", f"{gt / gs:.1f}", f"{(st / ss) / (gt / gs):.2f}x")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
