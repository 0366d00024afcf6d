"""Latency of the rollout inspector on a large run store.

Builds (once, cached under /tmp) an `rl` run store of 100k rollouts and 1M log records with bulk SQL
inserts, serves it with `looprl.inspector` on a loopback port, and prints p50/p95 latency of the main
API calls and HTML pages: the rollout list, a filtered list, a search (and its match snippets), a
rollout page (detail, reward arithmetic, siblings' replies), the token view, an example's history,
the metrics. The target is p95 under 150 ms for the list, the filtered list, the search, the rollout
page and the token view.

    .venv/bin/python bench/inspector.py [--rollouts 100000] [--logs-per-rollout 10] [--rebuild]
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sqlite3
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn

from looprl.paths import db_path
from looprl.store.schema import SCHEMA, SCHEMA_VERSION

GROUP_SIZE = 8
STEP_ROLLOUTS = 200  # train rollouts per step: 25 groups of 8
EVAL_EVERY, EVAL_ROLLOUTS = 20, 1000
SYLLABLES = ["ka", "lo", "mi", "ne", "qu", "ra", "sa", "te", "vi", "zo", "pe", "du", "fa", "gi", "ho", "ju",
             "bri", "cla", "dro", "fle"]
WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]  # 8,000 pseudo-words
REASONS = [("finished", 0.85), ("max_turns_exceeded", 0.05), ("output_exceeded", 0.04), ("tool_error", 0.03),
           ("timeout", 0.02), ("reward_error", 0.01)]
LEVELS = [(10, "DEBUG", 0.3), (20, "INFO", 0.6), (30, "WARNING", 0.08), (40, "ERROR", 0.02)]
LOGGERS = ["bench_env", "bench_env.tools", "bench_env.judge", "httpx"]


def _rollout_rows(rng: random.Random, n: int,
                  logs_per_rollout: int) -> Iterator[tuple[tuple, list[tuple], list[tuple]]]:
    """(rollout row, model call rows, log rows) for `n` rollouts: train steps with periodic evals."""
    t0, i, step = time.time() - 86400, 0, 0
    reasons, reason_weights = zip(*[(r, w) for r, w in REASONS])
    while i < n:
        plan = [("train", STEP_ROLLOUTS)] + ([("eval", EVAL_ROLLOUTS)] if step % EVAL_EVERY == 0 else [])
        for split, count in plan:
            for j in range(min(count, n - i)):
                rid, gid = f"{split}-s{step}-{j:04d}", f"{split}-s{step}-g{j // GROUP_SIZE:03d}"
                a, b = rng.randint(10, 999), rng.randint(10, 999)
                filler = " ".join(rng.choice(WORDS) for _ in range(10))
                messages = [
                    {"role": "system", "content": "You are a careful calculator agent. Use the tool, then answer."},
                    {"role": "user", "content": f"What is {a} + {b}? Context: {filler}"},
                    {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{j}", "type": "function",
                     "function": {"name": "calculator", "arguments": json.dumps({"expression": f"{a}+{b}"})}}]},
                    {"role": "tool", "tool_call_id": f"c{j}", "name": "calculator", "content": str(a + b)},
                    {"role": "assistant", "content": f"The sum is <answer>{a + b}</answer>."},
                ]
                reason = rng.choices(reasons, reason_weights)[0]
                failed = reason in ("tool_error", "timeout", "reward_error")
                rewards = {} if failed else {"correctness": float(rng.random() < 0.6), "format": rng.choice([0.0, 1.0])}
                if rewards and rng.random() < 0.5:
                    rewards["brevity"] = round(rng.random(), 3)
                started = t0 + step * 60 + rng.random() * 30
                duration = 0.5 + rng.random() * 8
                n_logs = rng.randint(max(0, logs_per_rollout - 5), logs_per_rollout + 5)
                logs = []
                for k in range(n_logs):
                    level, name = rng.choices([(lv, nm) for lv, nm, _ in LEVELS], [w for *_, w in LEVELS])[0]
                    exc = ("Traceback (most recent call last):\n  File \"env.py\", line 42\nValueError: bad"
                           if level == 40 else None)
                    logs.append((i, rid, started + duration * k / max(1, n_logs), level, name, rng.choice(LOGGERS),
                                 f"step {k}: checked {rng.choice(WORDS)} {rng.choice(WORDS)} -> {rng.random():.3f}",
                                 "env.py", 40 + k, "compute_reward", exc))
                calls = []
                for c in range(2):
                    completion = [rng.randint(0, 49151) for _ in range(20 + rng.randint(0, 60))]
                    calls.append((i, rid, c, started + c, 0.2 + rng.random(), 200, "stop" if c else "tool_calls",
                                  150 + 40 * c, len(completion),
                                  json.dumps([rng.randint(0, 49151) for _ in range(150 + 40 * c)]),
                                  json.dumps(completion),
                                  json.dumps([round(-rng.expovariate(2.0), 4) for _ in completion])))
                reward = None if failed else sum(rewards.values())
                row = (rid, "bench", step, split, "bench_env", f"ex{rng.randint(0, 5000)}", gid, reason,
                       f"{reason}: simulated failure" if failed else None, json.dumps(rewards), reward,
                       None if reward is None else reward - 1.2, 2, 1, sum(c[7] for c in calls),
                       sum(c[8] for c in calls), started, started + duration, duration, json.dumps(messages),
                       json.dumps({"answer": a + b}), n_logs, max((lg[3] for lg in logs), default=0))
                yield row, calls, logs
                i += 1
        step += 1


def build_store(run_dir: Path, n: int, logs_per_rollout: int) -> None:
    """Write the bench run store with bulk inserts (FTS indexes filled by the schema's triggers)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = db_path(run_dir)
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144;")
    conn.executescript(SCHEMA)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    conn.execute("INSERT INTO runs (run_id, kind, env, env_name, model, config, status, created_at) "
                 "VALUES ('bench', 'rl', 'bench_env.py:BenchEnv', 'bench_env', 'HuggingFaceTB/SmolLM2-135M-Instruct', "
                 "'{}', 'completed', ?)", (time.time() - 86400,))
    rng, batch, started = random.Random(0), [], time.time()
    conn.execute("BEGIN")
    for k, item in enumerate(_rollout_rows(rng, n, logs_per_rollout), 1):
        batch.append(item)
        if len(batch) == 2000 or k == n:
            conn.executemany(
                "INSERT INTO rollouts (rollout_id, run_id, step, split, env_name, example_id, group_id, "
                "termination_reason, error, rewards, reward, advantage, turns, tool_calls, prompt_tokens, "
                "completion_tokens, started_at, finished_at, duration_s, messages, example_args, log_count, "
                "max_log_level) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [row for row, _, _ in batch])
            conn.executemany(
                "INSERT INTO model_calls (run_id, rollout_id, idx, started_at, latency_s, status, finish_reason, "
                "prompt_tokens, completion_tokens, prompt_token_ids, completion_token_ids, completion_logprobs) "
                "VALUES ('bench', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [c[1:] for _, calls, _ in batch for c in calls])
            conn.executemany(
                "INSERT INTO rollout_logs (run_id, rollout_id, time, level, level_name, logger, message, pathname, "
                "lineno, func, exception) VALUES ('bench', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [lg[1:] for _, _, logs in batch for lg in logs])
            batch = []
            if k % 20000 == 0 or k == n:
                print(f"  {k:,} rollouts written ({time.time() - started:.0f}s)", flush=True)
    last_step = conn.execute("SELECT MAX(step) FROM rollouts").fetchone()[0]
    for step in range(last_step + 1):
        x = step / max(1, last_step)
        metrics = {
            "reward": 0.8 + x + rng.gauss(0, 0.05), "reward/correctness": 0.4 + 0.5 * x, "reward/format": 0.3 + 0.6 * x,
            "loss": 0.5 * (1 - x) + rng.gauss(0, 0.02), "entropy": 1.2 - 0.6 * x,
            "mismatch_kl": abs(rng.gauss(0.001, 0.0005)), "grad_norm": 0.3 + abs(rng.gauss(0, 0.1)), "lr": 1e-6}
        conn.execute("INSERT INTO steps (run_id, step, time, metrics) VALUES ('bench', ?, ?, ?)",
                     (step, time.time(), json.dumps(metrics)))
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("ANALYZE")
    conn.close()


def _serve(run_dir: Path) -> tuple[str, uvicorn.Server]:
    from looprl.inspector.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app([run_dir]), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def _measure(client: httpx.Client, paths: list[str], repeat: int) -> list[float]:
    """Latencies in ms of `repeat` rounds over `paths` (after one warm-up round)."""
    for path in paths:
        client.get(path).raise_for_status()
    out = []
    for _ in range(repeat):
        for path in paths:
            t = time.perf_counter()
            client.get(path).raise_for_status()
            out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--logs-per-rollout", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/looprl-bench-inspector"))
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    run_dir = args.dir / f"r{args.rollouts}-l{args.logs_per_rollout}"
    if args.rebuild or not db_path(run_dir).exists():
        print(f"building {run_dir} ({args.rollouts:,} rollouts) ...", flush=True)
        t = time.time()
        build_store(run_dir, args.rollouts, args.logs_per_rollout)
        print(f"built in {time.time() - t:.0f}s", flush=True)
    conn = sqlite3.connect(db_path(run_dir))
    n_rollouts, n_logs = (conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("rollouts", "rollout_logs"))
    conn.close()
    print(f"store: {n_rollouts:,} rollouts, {n_logs:,} log records, {db_path(run_dir).stat().st_size / 1e9:.2f} GB")
    base, server = _serve(run_dir)
    rng = random.Random(1)
    rollout_ids = [f"train-s{rng.randint(0, 399)}-{rng.randint(0, 199):04d}" for _ in range(args.repeat)]
    api = f"/api/runs/{run_dir.name}"
    cases: dict[str, list[str]] = {
        "list (train, newest first)": [f"{api}/rollouts?split=train&limit=50"],
        "list, page 100": [f"{api}/rollouts?split=train&limit=50&offset=5000"],
        "list sorted by reward": [f"{api}/rollouts?split=train&sort=reward&order=desc&limit=50"],
        "filtered (reason + reward range)": [
            f"{api}/rollouts?split=train&termination_reason=max_turns_exceeded&reward_min=1&limit=50"],
        "filtered (step range + has_error)": [
            f"{api}/rollouts?split=train&step_min=100&step_max=200&has_error=true&limit=50"],
        "filtered (log level >= ERROR)": [f"{api}/rollouts?split=train&min_log_level=40&limit=50"],
        "search (rare word)": [f"{api}/rollouts?q={w}&limit=50" for w in ("kaloqu", "zovifle", "brimisa")],
        "search (rare word) + split": [f"{api}/rollouts?split=train&q=teduho&limit=50"],
        "rollout detail API": [f"{api}/rollouts/{rid}" for rid in rollout_ids],
        "search snippets (50 rows)": [f"{api}/snippets?q={w}&" + "&".join(f"ids={rid}" for rid in rollout_ids[:50])
                                      for w in ("kaloqu", "step 3")],
        "rollout page HTML": [f"/runs/{run_dir.name}/rollouts/{rid}" for rid in rollout_ids],
        "reward arithmetic API": [f"{api}/rollouts/{rid}/explain" for rid in rollout_ids],
        "siblings' replies API": [f"{api}/rollouts/{rid}/replies" for rid in rollout_ids],
        "token view API": [f"{api}/rollouts/{rid}/tokens" for rid in rollout_ids],
        "example history API": [f"{api}/examples/ex{rng.randint(0, 5000)}/history" for _ in range(5)],
        "reward histogram API": [f"{api}/reward_histogram?split=train"],
        "run page HTML": [f"/runs/{run_dir.name}"],
        "metrics API": [f"{api}/metrics"],
        "runs API": ["/api/runs"],
    }
    print(f"{'call':38s} {'p50 ms':>8s} {'p95 ms':>8s}")
    with httpx.Client(base_url=base, timeout=60) as client:
        for name, paths in cases.items():
            ms = _measure(client, paths, max(1, args.repeat // len(paths)) if len(paths) > 1 else args.repeat)
            p95 = statistics.quantiles(ms, n=20)[-1] if len(ms) >= 2 else ms[0]
            print(f"{name:38s} {statistics.median(ms):8.1f} {p95:8.1f}", flush=True)
    server.should_exit = True


if __name__ == "__main__":
    main()
