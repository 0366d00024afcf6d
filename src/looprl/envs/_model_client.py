"""OpenAI clients for `BaseEnv`'s rollouts, sharing one HTTP connection pool per event loop.

Creating an HTTP client costs tens of milliseconds (TLS context, pools); one per rollout would
dominate fast environments. Each rollout gets its own `AsyncOpenAI` (its own gateway base URL) on
top of the loop's shared pool. The env host that owns the loop closes the pool.

The pool is the SDK's aiohttp transport (`openai.DefaultAioHttpClient`), not httpx's own: httpx's
pool scans every connection on each request and each response, so with hundreds of rollouts in
flight (a connection each) that scan was most of an env worker's CPU time; aiohttp's costs the same
at any size.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, cast

import httpx
import openai

MODEL_TIMEOUT_S = 600.0

_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.DefaultAioHttpClient] = weakref.WeakKeyDictionary()


def _pool() -> openai.DefaultAioHttpClient:
    loop = asyncio.get_running_loop()
    client = _pools.get(loop)
    if client is None or client.is_closed:
        # a connection per rollout in flight, all kept alive; the Limits class of the SDK's own httpx (httpx on
        # openai 2.x, httpx2 on 3.x: both lines are supported)
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=1024, max_keepalive_connections=1024)
        client = _pools[loop] = openai.DefaultAioHttpClient(timeout=MODEL_TIMEOUT_S, limits=limits)
    return client


def model_client(base_url: str) -> openai.AsyncOpenAI:
    """A client for one rollout's gateway URL (no retries: a failed call is the rollout's `model_error`)."""
    return openai.AsyncOpenAI(base_url=base_url, api_key="looprl", http_client=_pool(), max_retries=0)


async def warm_up() -> None:
    """Pay the first-use costs now, not inside the first rollout: this loop's pool (building its SSL
    context) and the SDK's first request and response (type hints it evaluates once, blocking the loop
    for up to a second on a busy machine). Env workers call it before they take rollouts."""
    _pool()
    reply = {"id": "warm-up", "object": "chat.completion", "created": 0, "model": "warm-up", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=reply))
    async with httpx.AsyncClient(transport=transport) as http:
        client = openai.AsyncOpenAI(base_url="http://warm-up/v1", api_key="looprl",
                                    http_client=cast(Any, http), max_retries=0)  # openai 3.x names httpx2; httpx works
        await client.chat.completions.create(model="warm-up", messages=[{"role": "user", "content": ""}],
                                             tools=[{"type": "function", "function": {"name": "f"}}])


async def aclose_pool() -> None:
    """Close this loop's shared pool (env hosts call it when they shut down)."""
    client = _pools.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()
