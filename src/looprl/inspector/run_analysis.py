"""The inspector's run-wide views: how an example fared over the run, where a search matched, and how
the rewards of a split spread at each step (per rollout: `looprl.inspector.rollout_analysis`).

Read-only, beside `looprl.inspector.api` (same `/api` prefix and run lookup).
"""

from __future__ import annotations

import threading
from typing import Literal

from fastapi import APIRouter, Depends, Query, Request

from looprl.inspector import queries
from looprl.inspector.analysis_types import ExampleHistory, HistoryPoint, RewardHistogram, Snippet
from looprl.inspector.api import run_ref
from looprl.inspector.catalog import RunRef

router = APIRouter(prefix="/api")


@router.get("/runs/{run_id}/examples/{example_id}/history", response_model=ExampleHistory)
def history(example_id: str, ref: RunRef = Depends(run_ref)) -> ExampleHistory:
    """The example's mean reward at every step it was sampled, per split, with a few of its rollouts."""
    with ref.source.connection() as conn:
        rows = queries.example_points(conn, ref.run_id, example_id)
    points: dict[tuple[str, int], list[tuple[str, float | None]]] = {}
    for split, step, rollout_id, reward in rows:
        points.setdefault((split, step), []).append((rollout_id, reward))
    out = []
    for (split, step), items in points.items():
        scored = [r for _, r in items if r is not None]
        out.append(HistoryPoint(split=split, step=step, rollouts=len(items), scored=len(scored),
                                mean_reward=sum(scored) / len(scored) if scored else None,
                                rollout_ids=[rid for rid, _ in items[:8]]))
    return ExampleHistory(example_id=example_id, points=out)


@router.get("/runs/{run_id}/snippets", response_model=dict[str, Snippet])
def snippets(q: str = Query(..., min_length=1), ids: list[str] = Query(..., max_length=500),
             ref: RunRef = Depends(run_ref)) -> dict[str, Snippet]:
    """For each of `ids`, the text the search `q` matched in, cut around the match."""
    with ref.source.connection() as conn:
        found = queries.snippets(conn, ids, q.strip())
    n, c = len(q.strip()), queries.SNIPPET_CONTEXT
    return {rid: Snippet(where=where, before=("…" if at > c else "") + text[max(0, at - c):at], match=text[at:at + n],
                         after=text[at + n:at + n + c] + ("…" if at + n + c < len(text) else ""))
            for rid, (where, text, at) in found.items()}


class HistogramCache:
    """Reward histograms per (run, split), recomputed when the split's rollout count changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, int], tuple[int, RewardHistogram]] = {}

    def get(self, ref: RunRef, split: str, bins: int) -> RewardHistogram:
        with ref.source.connection() as conn:
            count = conn.execute("SELECT COUNT(*) FROM rollouts WHERE run_id=? AND split=?",
                                 (ref.run_id, split)).fetchone()[0]
            key = (ref.id, split, bins)
            with self._lock:
                hit = self._cache.get(key)
            if hit and hit[0] == count:
                return hit[1]
            lo, hi, counts = queries.reward_histogram(conn, ref.run_id, split, bins)
        steps = sorted(counts)
        value = RewardHistogram(lo=lo, hi=hi, bins=bins, steps=steps, counts=[counts[s] for s in steps])
        with self._lock:
            self._cache[key] = (count, value)
        return value


@router.get("/runs/{run_id}/reward_histogram", response_model=RewardHistogram)
def reward_histogram(request: Request, split: Literal["train", "eval"] = "train", bins: int = Query(12, ge=2, le=50),
                     ref: RunRef = Depends(run_ref)) -> RewardHistogram:
    """How the split's rewards spread at each step."""
    return request.app.state.histograms.get(ref, split, bins)
