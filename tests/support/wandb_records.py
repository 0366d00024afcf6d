"""Reads back a W&B offline run file (`run-*.wandb`) in tests: wandb >= 0.31 no longer ships a
Python reader. The file is a 7-byte header (":W&B", magic, version) then a LevelDB log: 32 KiB
blocks of chunks, each with a 7-byte header (crc32c, length, type: 1 full, 2 first, 3 middle,
4 last); a whole chunk sequence is one serialized `wandb_internal_pb2.Record`."""

import struct
import time
from pathlib import Path

from google.protobuf.message import DecodeError
from wandb.proto import wandb_internal_pb2

BLOCK = 32768
FILE_HEADER = 7
CHUNK_HEADER = 7


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B"
    out, pending, offset = [], b"", FILE_HEADER
    while offset + CHUNK_HEADER <= len(data):
        left_in_block = BLOCK - offset % BLOCK
        if left_in_block < CHUNK_HEADER:  # the block's tail is padding
            offset += left_in_block
            continue
        _, length, kind = struct.unpack("<IHB", data[offset:offset + CHUNK_HEADER])
        chunk = data[offset + CHUNK_HEADER:offset + CHUNK_HEADER + length]
        offset += CHUNK_HEADER + length
        if kind == 0 and length == 0:  # zero padding
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def finished_records(path: Path, timeout_s: float = 30.0) -> list[wandb_internal_pb2.Record]:
    """`records(path)` once the run's `exit` record is on disk: W&B's service process writes the file
    on its own schedule, after `run.finish()` returns."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = records(path)
        except (AssertionError, struct.error, DecodeError):  # not written yet, or a chunk half written
            found = []
        if any(r.WhichOneof("record_type") == "exit" for r in found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
