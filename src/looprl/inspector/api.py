"""The inspector's JSON API: runs, the filtered rollout list, one rollout in full, and run metrics.

Read-only. Every filter becomes a bound parameter of the store's queries (`RolloutFilter`); every
endpoint declares its `response_model`. What SQLite cannot take is refused as a bad request (422, saying
which parameter) before it reaches a query: an integer outside SQLite's 64 bits, a NUL in a search.
The pages under `/runs` are built from these endpoints.
"""

from __future__ import annotations

import sqlite3
from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from looprl.errors import UserError
from looprl.inspector import queries
from looprl.inspector.api_types import (
    CollapseIntervention,
    EpochCoverage,
    ExplorationWarning,
    RolloutDetail,
    RolloutPage,
    RolloutRow,
    RunMetrics,
    RunSummary,
    SplitStats,
    StepMetrics,
)
from looprl.inspector.catalog import RunCatalog, RunRef
from looprl.session.collapse import ExplorationWatch
from looprl.session.collapse_recovery import SETTING_METRIC, BonusSwitch, Intervention, stored_method
from looprl.store.ledger import coverage
from looprl.store.reader import SORT_COLUMNS, RolloutFilter, RunStoreReader
from looprl.store.records import RolloutRecord, RunInfo

router = APIRouter(prefix="/api")

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""The range of SQLite's INTEGER: a larger bound parameter would raise `OverflowError` in the query."""

SortKey = Literal["step", "reward", "duration", "turns", "tokens", "started", "example", "reason", "advantage"]
assert set(SortKey.__args__) == set(SORT_COLUMNS)  # type: ignore[attr-defined]


def catalog(request: Request) -> RunCatalog:
    return request.app.state.catalog


def run_ref(run_id: str, runs: RunCatalog = Depends(catalog)) -> RunRef:
    ref = runs.find(run_id)
    if ref is None:
        raise HTTPException(404, f"no run {run_id!r}")
    return ref


def rollout_filter(
    split: Literal["train", "eval"] | None = None,
    step: int | None = Query(None, ge=INT_MIN, le=INT_MAX),
    step_min: int | None = Query(None, ge=INT_MIN, le=INT_MAX),
    step_max: int | None = Query(None, ge=INT_MIN, le=INT_MAX),
    termination_reason: str | None = None,
    reward_min: float | None = None,
    reward_max: float | None = None,
    has_error: bool | None = None,
    min_log_level: int | None = Query(
        None, description="only rollouts with a log record at this stdlib level or above", ge=INT_MIN, le=INT_MAX),
    q: str | None = Query(None, description="substring of the transcript or of a log record"),
    group_id: str | None = None,
    sort: SortKey = "step",
    order: Literal["asc", "desc"] = "desc",
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=INT_MAX),
) -> RolloutFilter:
    """The rollout list's query parameters; empty strings (blank form fields) mean no filter."""
    if q is not None and "\x00" in q:  # the full-text query syntax ends at a NUL: SQLite would fail the search
        raise HTTPException(422, "q: a search cannot contain a NUL character")
    return RolloutFilter(
        split=split, step=step, step_min=step_min, step_max=step_max, termination_reason=termination_reason or None,
        reward_min=reward_min, reward_max=reward_max, has_error=has_error, min_log_level=min_log_level,
        q=(q or "").strip() or None, group_id=group_id or None, sort=sort, order=order, limit=limit, offset=offset)


@router.get("/runs", response_model=list[RunSummary])
def list_runs(runs: RunCatalog = Depends(catalog)) -> list[RunSummary]:
    out = []
    for ref, run in runs.runs():
        with ref.source.reader() as r:
            out.append(_summary(r, ref, run))
    return out


@router.get("/runs/{run_id}", response_model=RunSummary)
def get_run(ref: RunRef = Depends(run_ref)) -> RunSummary:
    with ref.source.reader() as r:
        return _summary(r, ref, r.run(ref.run_id))


@router.get("/runs/{run_id}/rollouts", response_model=RolloutPage)
def list_rollouts(ref: RunRef = Depends(run_ref), f: RolloutFilter = Depends(rollout_filter)) -> RolloutPage:
    with ref.source.reader() as r:
        records, total = r.list_rollouts(ref.run_id, f, transcripts=False)
    rows = _rows(records)
    components = sorted({c for row in rows for c in [*row.rewards, *row.zero_filled]})
    return RolloutPage(rows=rows, total=total, limit=f.limit, offset=f.offset, components=components)


@router.get("/runs/{run_id}/rollouts/{rollout_id}", response_model=RolloutDetail)
def get_rollout(rollout_id: str, ref: RunRef = Depends(run_ref),
                f: RolloutFilter = Depends(rollout_filter)) -> RolloutDetail:
    """One rollout in full; `prev_id`/`next_id` follow the list the same filters and sort select."""
    with ref.source.reader() as r:
        record = _rollout(r, ref, rollout_id)
        siblings = _rows(r.siblings(record.group_id, transcripts=False))
        prev_id, next_id = r.neighbours(ref.run_id, rollout_id, f)
    return RolloutDetail(**dict(record), run=ref.id, siblings=siblings, sibling_ids=[s.rollout_id for s in siblings],
                         prev_id=prev_id, next_id=next_id)


@router.get("/runs/{run_id}/metrics", response_model=RunMetrics)
def get_metrics(ref: RunRef = Depends(run_ref)) -> RunMetrics:
    """Step metrics (numeric ones) and, per split, termination reasons and per-step reward means."""
    with ref.source.reader() as r:
        raw = r.steps(ref.run_id)
        steps = [StepMetrics(step=s["step"], time=s["time"], metrics={
            k: float(v) for k, v in s.items() if k not in ("step", "time") and _is_number(v)}) for s in raw]
        keys = list(dict.fromkeys(k for s in steps for k in s.metrics))
        splits = {}
        for split, count in r.rollout_counts(ref.run_id).items():
            # training steps already carry reward means; per-step stats from rollouts otherwise
            by_step = [] if split == "train" and steps else r.step_rewards(ref.run_id, split)
            splits[split] = SplitStats(rollouts=count, termination_reasons=r.termination_reasons(ref.run_id, split),
                                       by_step=by_step)
        epochs = [EpochCoverage(epoch=c.epoch, size=c.size, outcomes=c.outcomes, retrained=c.retrained,
                                redrawn=c.redrawn, resumed_from=c.resumed_from, line=c.line())
                  for c in coverage(r.ledger(ref.run_id))]
    with ref.source.connection() as conn:
        exploration = exploration_warnings(conn, ref.run_id, steps)
    return RunMetrics(steps=steps, keys=keys, splits=splits, exploration=exploration, coverage=epochs,
                      interventions=collapse_interventions(steps))


def collapse_interventions(steps: list[StepMetrics]) -> list[CollapseIntervention]:
    """Collapse recovery's interventions, from the `collapse/...` metrics of the stored steps."""
    out: list[CollapseIntervention] = []
    previous: dict[str, float] = {}
    for s in steps:
        found = Intervention.from_metrics(s.step, s.metrics, previous)
        if found:
            out.append(CollapseIntervention(step=found.step, action=found.action, method=found.method,
                                            message=found.line(), value_from=found.value_from,
                                            value_to=found.value_to, entropy_coef=found.entropy_coef,
                                            progress=found.progress, plateau=found.plateau))
        if (switch := BonusSwitch.from_metrics(s.step, s.metrics)) and (method := stored_method(s.metrics)):
            coef = switch.coef
            out.append(CollapseIntervention(step=s.step, action="bonus_off" if switch.held else "bonus_on",
                                            method=method, message=switch.line(),
                                            value_from=coef if switch.held else 0.0,
                                            value_to=0.0 if switch.held else coef))
        previous.update((k, s.metrics[k]) for k in SETTING_METRIC.values() if k in s.metrics)
    return out


def exploration_warnings(conn: sqlite3.Connection, run_id: str, steps: list[StepMetrics]) -> list[ExplorationWarning]:
    """The orchestrator's "stopped exploring" warnings, replayed over the stored steps that count their groups."""
    watch, out = ExplorationWatch(), []
    for s in steps:
        if line := watch.replay(s.step, s.metrics):
            out.append(ExplorationWarning(step=s.step, message=line,
                                          rollout_id=queries.no_signal_rollout(conn, run_id, s.step)))
    return out


def _rows(records: list[RolloutRecord]) -> list[RolloutRow]:
    return [RolloutRow(**dict(rec)) for rec in records]


def _rollout(r: RunStoreReader, ref: RunRef, rollout_id: str) -> RolloutRecord:
    try:
        record: RolloutRecord | None = r.rollout(rollout_id)
    except UserError:  # no such rollout
        record = None
    if record is None or record.run_id != ref.run_id:
        raise HTTPException(404, f"no rollout {rollout_id!r} in run {ref.id!r}")
    return record


def _summary(r: RunStoreReader, ref: RunRef, run: RunInfo) -> RunSummary:
    steps = r.steps(ref.run_id)
    last = steps[-1] if steps else {}
    last_reward = last.get("reward") if _is_number(last.get("reward")) else None
    if last_reward is None:
        split = "train" if run.kind == "rl" else "eval"
        last_reward = r.mean_reward(ref.run_id, split, r.max_step(ref.run_id, split))
    return RunSummary(
        id=ref.id, run_id=run.run_id, run_dir=str(ref.source.run_dir), kind=run.kind, env=run.env,
        env_name=run.env_name, model=run.model, status=run.status, created_at=run.created_at,
        finished_at=run.finished_at, steps=len(steps), last_step=last.get("step"), last_reward=last_reward,
        rollouts=r.rollout_counts(ref.run_id), summary=run.summary)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

