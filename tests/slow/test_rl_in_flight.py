"""`looprl rl` with `orchestrator.in_flight_updates = true`, on the bundled SmolLM2 and the stories task
(`bench/long_tail_env.py:StoriesEnv`), on the embedded engine: new weights load while replies
generate, and the store, `looprl rollouts --json` and the step metrics show replies sampled by more than one
policy version. Its groups alternate between short and long stories that all score 1: the trainer republishes
its weights a moment after each batch, while a long story started before it still generates (with a task that
trained, or whose groups finished together, the update could land between replies: CI failed twice so). The
trainer trains nothing, so the versions carry the same weights: this is the engine's and the store's
bookkeeping. Both engines' swap of changed weights under a running reply, and the `weight_versions` spans
each engine answers with, are checked through their HTTP routes in tests/slow/test_engine_conformance.py
(`test_an_in_flight_update_changes_the_tokens_after_it`); the orchestrator's side, tested here, is the same
for both, so this run is on the embedded engine only (on vLLM it cost `make test` four more minutes)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def looprl(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "looprl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_replies_span_weight_updates(tmp_path):
    out = tmp_path / "run"
    looprl("rl", "@", "examples/demo/rl.toml", "--env.source", "bench/long_tail_env.py:StoriesEnv",
           "--output_dir", str(out), "--max_steps", "5", "--orchestrator.batch_size", "8",
           "--orchestrator.group_size", "4", "--orchestrator.sampling.max_tokens", "192",
           "--orchestrator.eval.num_examples", "0", "--orchestrator.reward_weights", "{}",
           "--orchestrator.max_off_policy_steps", "1", "--orchestrator.in_flight_updates", "true")
    rows = [json.loads(line) for line in looprl("rollouts", str(out), "--split", "train", "--json").splitlines()]
    versions = [v for r in rows for v in r["policy_versions"]]
    assert versions and all(v is not None and len(v) > 0 for v in versions)  # every reply says who sampled it
    mixed = [v for v in versions if len(set(v)) > 1]
    assert mixed, "no reply spans a weight update"
    for v in mixed:  # a reply continues on newer weights, never back on older ones
        assert v == sorted(v)
    metrics = [json.loads(line) for line in looprl("metrics", str(out), "--json").splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 6))
    assert max(m.get("policy_versions_per_reply", 1.0) for m in metrics) > 1
