"""The prompt ledger in the store: draws recorded, settled, undone by a resume (kept, marked), cancelled;
and the per-epoch coverage `looprl metrics` and the inspector show."""

from looprl.store.ledger import LedgerEntry, coverage
from looprl.store.reader import RunStoreReader
from looprl.store.writer import RunStoreWriter


def entry(group: str, epoch: int, position: int, outcome: str = "in_flight", step: int | None = None,
          undone_at: int | None = None, size: int = 4) -> LedgerEntry:
    return LedgerEntry(group_id=group, epoch=epoch, position=position, example_id=f"ex{position}", epoch_size=size,
                       drawn_at=float(position), outcome=outcome, step=step, undone_at=undone_at)


def test_draws_are_settled_undone_by_a_resume_and_cancelled(tmp_path):
    w = RunStoreWriter(tmp_path)
    w.record_draws("run", [entry(f"g{i}", 1, i) for i in range(4)])
    w.settle_draws("run", [("g0", "trained", 1, None), ("g1", "stale", 1, "old weights"), ("g2", "trained", 2, None)])
    w.delete_steps_after("run", 1)  # a resume from checkpoint 1: step 2's outcome and g3 in flight are undone
    w.record_draws("run", [entry("g4", 1, 2), entry("g5", 1, 3)])
    w.settle_draws("run", [("g4", "trained", 2, None)])
    w.cancel_draws("run", "the run ended")
    w.close()
    rows = {e.group_id: e for e in RunStoreReader(tmp_path).ledger("run")}
    assert (rows["g0"].outcome, rows["g0"].step, rows["g0"].undone_at) == ("trained", 1, None)
    assert (rows["g1"].outcome, rows["g1"].reason, rows["g1"].undone_at) == ("stale", "old weights", None)
    assert (rows["g2"].outcome, rows["g2"].undone_at) == ("trained", 1)  # kept: it says what the resume undid
    assert (rows["g3"].outcome, rows["g3"].undone_at) == ("in_flight", 1)  # an undone draw is not cancelled
    assert (rows["g5"].outcome, rows["g5"].reason) == ("cancelled", "the run ended")
    [epoch] = coverage(list(rows.values()))
    assert epoch.outcomes == {"trained": 2, "stale": 1, "cancelled": 1}
    assert (epoch.retrained, epoch.redrawn, epoch.resumed_from, epoch.repeated) == (1, 1, [1], 0)
    assert epoch.line() == ("epoch 1: 2/4 examples trained, 1 dropped stale, 1 cancelled at the end, "
                            "1 retrained and 1 redrawn after resume from step 1")


def test_coverage_counts_each_epoch_and_flags_an_example_trained_twice():
    entries = [entry("a", 1, 0, "trained", 1), entry("b", 1, 1, "skipped", 1), entry("c", 1, 1, "trained", 2),
               entry("d", 2, 0, "failed", 3), entry("e", 2, 1, "filtered", 3)]
    first, second = coverage(entries)
    assert first.repeated == 1 and "1 trained more than once" in first.line()
    assert second.line() == "epoch 2: 0/4 examples trained, 1 filtered, 1 failed, 2 not drawn yet"
