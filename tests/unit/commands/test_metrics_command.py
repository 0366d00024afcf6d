"""`looprl metrics`: a default table that fits 100 columns, a readable `--all`, `–` for steps that did
not train, counts as integers, and `--json` unchanged."""

import json

import pytest
from tests.unit.store.rl_steps import build_rl_store

from looprl.cli import main

UNTRAINED_STEP = 3


@pytest.fixture
def run_dir(tmp_path):
    return build_rl_store(tmp_path / "demo", steps=16, untrained=UNTRAINED_STEP)


def metrics(capsys, *args: str) -> list[str]:
    assert main(["metrics", *args]) == 0
    return capsys.readouterr().out.splitlines()


def row(lines: list[str], first: str) -> list[str]:
    return next(line.split() for line in lines if line.split()[:1] == [first])


def test_default_table_fits_100_columns_with_whole_numbers(run_dir, capsys):
    lines = metrics(capsys, str(run_dir))
    assert max(map(len, lines)) <= 100 and not any("…" in line for line in lines)
    header = row(lines, "step")
    assert header[:5] == ["step", "reward", "eval", "pass", "loss"] and "kl" in header and "grad" in header
    first = dict(zip(header, row(lines, "1")))
    assert first["reward"] == "0.506" and first["eval"] == "1.275" and first["loss"] == "-0.0123"
    assert first["kl"] == "1.23e-04" and first["skip"] == "1" and first["drop"] == "1"
    assert dict(zip(header, row(lines, "2")))["eval"] == "–"  # no eval at this step


def test_a_step_that_did_not_train_shows_dashes_not_zeros(run_dir, capsys):
    lines = metrics(capsys, str(run_dir))
    untrained = dict(zip(row(lines, "step"), row(lines, str(UNTRAINED_STEP))))
    assert [untrained[c] for c in ("loss", "entropy", "kl", "grad")] == ["–"] * 4
    assert untrained["skip"] == "4" and untrained["reward"] == "0.706"


def test_all_lists_every_metric_per_row_in_chunks_of_steps(run_dir, capsys):
    lines = metrics(capsys, str(run_dir), "--all")
    assert max(map(len, lines)) <= 100 and not any("…" in line for line in lines)
    headers = [line.split() for line in lines if line.startswith("step ")]
    assert len(headers) > 1 and [s for h in headers for s in h[1:]] == [str(s) for s in range(1, 17)]
    first_chunk = len(headers[0]) - 1
    assert row(lines, "rollouts")[1:] == ["32"] * first_chunk  # counts are integers
    assert row(lines, "termination/timeout")[1:] == ["1"] * first_chunk
    assert row(lines, "train/loss")[UNTRAINED_STEP] == "–" and row(lines, "train/loss")[1] == "-0.0123"
    assert row(lines, "train/lr")[1] == "1.00e-06" and row(lines, "eval/reward")[1:3] == ["1.275", "–"]


def test_json_keeps_the_stored_values(run_dir, capsys):
    steps = [json.loads(line) for line in metrics(capsys, str(run_dir), "--json")]
    assert len(steps) == 16 and steps[UNTRAINED_STEP - 1]["train/loss"] == 0.0 and steps[0]["rollouts"] == 32.0


def test_a_run_without_steps_says_so(tmp_path, capsys):
    lines = metrics(capsys, str(build_rl_store(tmp_path / "empty", steps=0)))
    assert lines[-1] == "no steps recorded yet"
