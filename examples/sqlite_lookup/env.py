"""Per-rollout resources: `rollout_context` seeds a private SQLite database that the tool queries."""

import logging
import sqlite3
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, Example, JsonlDataset, Tool
from looprl.rewards import extract_answer_block, normalize_number

logger = logging.getLogger(__name__)


class SqliteLookupEnv(BaseEnv):
    max_turns = 3
    max_tool_calls = 4

    def __init__(self) -> None:
        self._dbs: dict[str, Path] = {}

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example):
        with tempfile.TemporaryDirectory(prefix="looprl-sqlite-") as tmp:
            path = Path(tmp) / "people.db"
            with sqlite3.connect(path) as db:
                db.execute("CREATE TABLE people (name TEXT PRIMARY KEY, age INTEGER)")
                db.executemany("INSERT INTO people VALUES (?, ?)", example.payload["people"].items())
            logger.info("seeded %s with %d people", path.name, len(example.payload["people"]))
            self._dbs[rollout_id] = path
            try:
                yield
            finally:
                del self._dbs[rollout_id]

    async def list_tools(self) -> list[Tool]:
        return [{"type": "function", "function": {
            "name": "query", "description": "Run a read-only SQL query against the database.",
            "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args):
        sql = str(tool_args.get("sql", ""))
        logger.info("query: %s", sql)
        with sqlite3.connect(f"file:{self._dbs[rollout_id]}?mode=ro", uri=True) as db:
            try:
                rows = db.execute(sql).fetchmany(20)
            except sqlite3.Error as e:
                logger.warning("query failed: %s", e)
                return f"SQL error: {e}"
        return rows

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = normalize_number(extract_answer_block(rollout.messages))
        return {"correct": float(answer == rollout.example_args["answer"])}
