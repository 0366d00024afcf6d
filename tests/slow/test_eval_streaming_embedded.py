"""A streaming OpenAI client inside `looprl eval` on the embedded engine with the bundled SmolLM2: the real path."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from looprl.store.reader import RunStoreReader

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_streamed_call_stores_the_token_ids_and_logprobs_of_a_plain_call(tmp_path):
    """Each rollout asks the same question streamed, then plain (greedy, one rollout at a time, so both run
    alone on the engine): the stored calls' token ids and logprobs are equal, and so is the text."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "looprl.cli", "eval", "tests/support/streaming_env.py:StreamingEnv", "-n", "2",
         "-r", "1", "--concurrency", "1", "--temperature", "0", "--max-tokens", "24", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in subprocess.run(
        [sys.executable, "-m", "looprl.cli", "rollouts", str(out), "--json"], cwd=ROOT, capture_output=True,
        text=True, check=True).stdout.splitlines()]
    assert len(rows) == 2 and all(r["rewards"] == {"same_answer": 1.0} for r in rows)
    reader = RunStoreReader(out)
    for row in rows:
        streamed, plain = reader.model_calls(row["rollout_id"])
        assert streamed.status == plain.status == 200 and streamed.completion_token_ids
        assert streamed.prompt_token_ids == plain.prompt_token_ids
        assert streamed.completion_token_ids == plain.completion_token_ids
        assert streamed.completion_logprobs == plain.completion_logprobs
        assert len(streamed.completion_logprobs) == len(streamed.completion_token_ids) == streamed.completion_tokens
