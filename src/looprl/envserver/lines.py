"""The protocol's lines under a size limit (`env.max_message_bytes`), on both sides of the pipe.

A sender checks each message before it writes it (`encode_within` raises `MessageTooLarge`), so that a
result too large to send fails its own rollout as `message_too_large` and not the line. A reader that
still meets a longer line must not die of it (asyncio's `readline` raises and leaves the reading task
dead, and with it every group in flight): `read_line` reads such a line out to its newline, keeping
its first bytes (`Overlong`), so that the stream stays in step and the receiver can tell from the
line's head which request it answered (`Overlong.names`).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from looprl.envserver.protocol import encode

MESSAGE_TOO_LARGE = "message_too_large"
HEAD_BYTES = 4096
"""How much of an overlong line is kept: enough for its `kind` and the id it names."""

_HEAD = re.compile(rb'\{"kind":"([a-z_]+)","(?:id|rollout_id)":"((?:[^"\\]|\\.)*)"')


class MessageTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a message of {size:,} bytes is over the {limit:,}-byte limit (env.max_message_bytes)")
        self.size, self.limit = size, limit


UNSENDABLE = (MessageTooLarge, PydanticSerializationError)
"""Why a message cannot go out: too large, or holding a value JSON cannot carry."""


def too_large_error(what: str, limit: int) -> str:
    """The error of a rollout whose message did not fit: `what` (with its size), the limit, and the keys to change."""
    return (f"{what} is over the {limit:,}-byte limit on one message between the env server and its workers; raise "
            "env.max_message_bytes, or keep transcripts smaller (env.max_transcript_chars, env.max_tool_result_chars)")


def encode_within(message: BaseModel, limit: int) -> bytes:
    """`message` as one protocol line, or `MessageTooLarge` when the line would be longer than `limit` bytes."""
    data = encode(message)
    if len(data) > limit:
        raise MessageTooLarge(len(data), limit)
    return data


@dataclass
class Overlong:
    """A line longer than the reader's limit, read out and dropped: its first bytes and its size."""

    head: bytes
    size: int

    def names(self) -> tuple[str, str] | None:
        """The message's `kind` and the id it names first (`id`, or a log record's `rollout_id`), when its head
        holds them (every message is written `kind` first, then that id)."""
        match = _HEAD.match(self.head)
        if match is None:
            return None
        try:
            ident = json.loads(b'"' + match[2] + b'"')
        except ValueError:
            return None
        return match[1].decode(), ident


async def read_line(reader: asyncio.StreamReader) -> bytes | Overlong:
    """The next line (b"" at the end of the stream), or an `Overlong` for a line past the reader's limit."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as e:
        return e.partial
    except asyncio.LimitOverrunError as e:
        head = await reader.read(e.consumed)
    size = len(head)
    while True:  # read the rest out, to the next newline or the end of the stream
        try:
            size += len(await reader.readuntil(b"\n"))
            break
        except asyncio.LimitOverrunError as e:
            size += len(await reader.read(e.consumed))
        except asyncio.IncompleteReadError as e:
            size += len(e.partial)
            break
    return Overlong(head[:HEAD_BYTES], size)
