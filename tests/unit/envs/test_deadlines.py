"""`deadline`: a timeout whose stack names the line the code hung on, through the whole await chain."""

import asyncio
from contextlib import AsyncExitStack, asynccontextmanager

import pytest

from looprl.envs._deadlines import deadline


async def hang_here():
    await asyncio.sleep(60)


@asynccontextmanager
async def hanging_context():
    await hang_here()
    yield


async def test_the_stack_reaches_the_innermost_await_through_async_with():
    with pytest.raises(TimeoutError):
        async with deadline(0.05) as stuck, AsyncExitStack() as stack:
            await stack.enter_async_context(hanging_context())
    assert stuck.stack.startswith("Stack for <Task")
    assert "in hanging_context\n    await hang_here()" in stuck.stack
    assert "in hang_here\n    await asyncio.sleep(60)" in stuck.stack


async def test_no_stack_without_a_timeout():
    async with deadline(None) as stuck:
        await asyncio.sleep(0)
    assert stuck.stack == ""
