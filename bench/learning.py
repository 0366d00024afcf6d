"""Reward against wall-clock and steps: `looprl rl` and TRL's `GRPOTrainer`, same model, task, sampling, batch.

Both train SmolLM2-135M-Instruct on each of `--tasks`' `rl.toml` (`demo`: single-digit additions, which
both saturate within minutes; `two_digit`: two-digit additions, which neither masters in ten
minutes; `large_number`: is a number greater than 50, yes or no, an easy task on which the
policy stops exploring by answering "No" to every question; `one_word`: format following, name a
thing of a category in one word and nothing else) with the same reward (the task's
`env.py:score`, weighted as in `rl.toml`), sampling (temperature, max tokens), rollouts per step and
groups, learning rate and no KL, for `--seeds` runs
each of `--budget-s` seconds, one after the other. looprl runs as a user runs it (`looprl rl`:
engine, orchestrator and trainer processes, the config's defaults); TRL runs `GRPOTrainer` as its
users do (generation with `model.generate` in the training process), one process per seed too. Every
setting in which the two runs still differ is printed with the results.

The clock starts when a run is launched (imports and model loading included). A step's reward is
timed when it became known: when looprl wrote the step's batch, when TRL called its reward functions
(generation done, before the training step). Per system it prints the median [range] over seeds of
the seconds and the steps until a step's train reward first reached 50 %, 80 % and 95 % of the
task's maximum, how many seeds got there and the looprl/TRL ratio of the medians; the same for the
mean of 3 steps in a row (one step's 64 rollouts come from 8 prompts, so one lucky step says
little); the mean train reward over the first K steps, K as many as every run made (progress per
step, whatever the levels); and the worst drop of the 3-step mean reward after a seed first reached
80 % (from its running peak: a collapse shows here). It writes `results.json` per task and a PNG of
every seed's reward against seconds and against steps.

Then the learning matrix (issue 37): per task, the systems side by side, the median and the worst
seed of the seconds to 80 % and 95 % (3-step mean), of the longest run of steps in which most groups
carried no signal while the task was unsolved (the 10-step mean reward below 90 %), and how many
seeds stalled (8 such steps of 10 consecutive ones), and how many stalled by the issue's first reading of a step without
signal, every group without it (a step that trains nothing). A step whose groups without signal are all solved (every
rollout at the task's `solved_reward`) does not count, as looprl's collapse watch does not count it
(`looprl.session.collapse`, `groups_solved`): a policy that solves most questions is not stuck.
`--systems looprl looprl-recovery looprl-rollback` compares
collapse recovery's methods (`[orchestrator.collapse]`: the defaults' (the temperature), the temperature without
escalation to a rollback (pinned, whatever the default), the rollback;
`--looprl-args "--orchestrator.collapse.method off"` turns it off); defaults are chosen by the worst seed.

    .venv/bin/python bench/learning.py [--tasks demo two_digit large_number one_word] [--seeds 3 [--first-seed 0]]
        [--budget-s 600]
        [--lr 2e-5] [--systems looprl looprl-recovery looprl-rollback trl]
        [--looprl-args "--orchestrator.max_off_policy_steps 0"]
        [--stop-at 0.95 [--stop-window 3]] [--out runs/bench-learning]
    .venv/bin/python bench/learning.py --summarize runs/bench-learning/*/results.json   # again, no runs
    # lanes run in parallel, one system a core, each with its own --results-dir: one comparison again
    .venv/bin/python bench/learning.py --summarize lane0/large_number/results.json lane1/large_number/results.json
    .venv/bin/python bench/learning.py --tasks large_number --per-class runs/bench-learning/large_number/looprl-0
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import re
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # looprl is imported where it is used (the module's start-up is timed)
    from looprl.config import CollapseRecovery

ROOT = Path(__file__).resolve().parents[1]
TASKS = {name: ROOT / "examples" / name for name in ("demo", "two_digit", "large_number", "one_word")}
LEVELS = (0.5, 0.8, 0.95)
MEAN_OF = 3  # steps averaged for the steadier reading of when a level was reached
SYSTEMS = ("looprl", "looprl-recovery", "looprl-rollback", "trl")
"""looprl with its defaults, looprl with collapse recovery's method set (`[orchestrator.collapse]`: raising the
temperature, rolling back at a lower learning rate), TRL."""
RECOVERY_ARGS = {"looprl-recovery": ["--orchestrator.collapse.method", "temperature",
                                     "--orchestrator.collapse.escalate", "false"],
                 "looprl-rollback": ["--orchestrator.collapse.method", "rollback"]}
"""The `looprl rl` overrides of each recovering system: the temperature alone (no escalation to a rollback: as
the matrix measured it before `escalate` existed), the rollback; `looprl` itself runs the defaults (the escalation:
`--looprl-args "--orchestrator.collapse.escalate true"`)."""
STALL_WINDOW, STALL_STEPS, UNSOLVED = 10, 8, 0.9
"""A seed stalls when STALL_STEPS of STALL_WINDOW consecutive steps carried no signal while the
STALL_WINDOW-step mean reward was below UNSOLVED of the maximum (issue 37's criterion). The window is
`looprl.session.collapse_recovery.STALL_WINDOW`, and the count one more than its `STALL_STEPS` (the temperature
recovery acts on the step before a run is stuck by this count), written out here because the TRL worker runs this
module and its start-up is timed: it must not import looprl."""
CLASS_ARG = {"large_number": "answer"}
"""Tasks whose examples fall into classes, and the example argument naming an example's class. A policy giving
one answer to every example there scores its class's share, and on a step of 4 prompts a lucky draw of them
looks like learning; the reward per class averaged over the classes (`balanced`) stays at 1/2 for it."""
ClassRewards = dict[str, dict[str, list[float]]]
"""Per step (a string: a JSON key), per class: [sum of the rollouts' rewards, rollouts]."""
Point = tuple[float, int, float, float | None]
"""Seconds since launch, step, the step's mean train reward, the share of its groups without signal (all
rewards alike), 0 where those groups are all solved (`stuck_share`); None in results of older runs, and in
those written before 2026-12-06 solved groups count too (looprl's `no_signal_frac`, TRL's
`frac_reward_zero_std`)."""


def task_env(task: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{task}_env", TASKS[task] / "env.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task_config(task: str) -> dict[str, Any]:
    return tomllib.loads((TASKS[task] / "rl.toml").read_text())


def train_payloads(task: str) -> list[dict[str, Any]]:
    """The task's training examples as looprl reads them: its env class's `create_dataset("train")`."""
    env_class = getattr(task_env(task), task_config(task)["env"]["source"].rsplit(":", 1)[1])
    return [e.payload for e in asyncio.run(env_class().create_dataset("train", TASKS[task] / "data"))]


def reward_weights(task: str) -> dict[str, float]:
    """Every component `score` returns, with its weight in the task's `rl.toml` (1 if not listed)."""
    listed = task_config(task).get("orchestrator", {}).get("reward_weights", {})
    return {name: listed.get(name, 1.0) for name in task_env(task).score("", example_args(train_payloads(task)[0]))}


def example_args(payload: dict[str, Any]) -> dict[str, Any]:
    """What the env's reward reads as `rollout.example_args`: every payload field but the prompt."""
    return {k: v for k, v in payload.items() if k != "prompt_messages"}


def max_reward(task: str) -> float:
    """A solving reply's total reward: the task's `orchestrator.collapse.solved_reward`, which the collapse watch
    reads too."""
    return float(task_config(task)["orchestrator"]["collapse"]["solved_reward"])


# --- the runs ---------------------------------------------------------------------------------


def run_looprl(args: argparse.Namespace, seed: int, out: Path, system: str = "looprl") -> list[Point]:
    """One looprl seed as a user runs it; a recovering `system` with its collapse recovery on (`RECOVERY_ARGS`)."""
    subprocess.run(["rm", "-rf", str(out)], check=True)
    command = [
        sys.executable,
        "-m",
        "looprl.cli",
        "rl",
        "@",
        str(TASKS[args.task] / "rl.toml"),
        "--output_dir",
        str(out),
        "--max_steps",
        "10000",
        "--seed",
        str(seed),
        "--orchestrator.eval.num_examples",
        "0",
        "--trainer.optim.lr",
        str(args.lr),
        *shlex.split(args.looprl_args),
        *RECOVERY_ARGS.get(system, []),
    ]
    started = time.time()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop_level = args.stop_at * max_reward(args.task) if args.stop_at else None
    while proc.poll() is None and time.time() - started < args.budget_s:
        time.sleep(2)
        if stop_level is None:
            continue
        points = [(0.0, step, r, None) for step, (r, _) in sorted(_step_rewards(out).items())]
        if first_reached(points, stop_level, args.stop_window) is not None:
            break
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    rewards = _step_rewards(out)
    return [(t, step, *rewards[step]) for step, t in _batch_written(out, started).items() if step in rewards]


def _step_metrics(out: Path) -> dict[int, dict[str, Any]]:
    """Each finished step's metrics, from the run's store (empty before the first step)."""
    if not (out / "looprl.db").exists():
        return {}
    try:
        with sqlite3.connect(f"file:{out / 'looprl.db'}?mode=ro", uri=True, timeout=5) as db:
            return {step: json.loads(m) for step, m in db.execute("SELECT step, metrics FROM steps")}
    except sqlite3.OperationalError:  # the run has not created its tables yet
        return {}


def _step_rewards(out: Path) -> dict[int, tuple[float, float]]:
    """Each finished step's mean train reward and share of groups without signal that do not say the task is
    solved (the collapse watch's count, `looprl.session.collapse.step_counts`)."""
    from looprl.session.collapse import step_counts

    counts = {step: (m["reward"], *step_counts(m)) for step, m in _step_metrics(out).items()}
    return {step: (reward, stuck / max(sampled, 1)) for step, (reward, sampled, stuck) in counts.items()}


def stuck_share(totals: Sequence[float], group_size: int, solved: float) -> float:
    """The share of groups (`group_size` consecutive rollouts' total rewards) without signal, 0 where every such
    group is all at `solved`, for a TRL step: looprl's own rules (`session.advantages.group_advantages` says which
    groups carry no signal, the collapse watch which of them say the task is solved, `step_counts` what is left)."""
    from looprl.session.advantages import group_advantages
    from looprl.session.collapse import ExplorationWatch, step_counts

    groups = [group_advantages(totals[i : i + group_size], normalize_std=False)
              for i in range(0, len(totals), group_size)]
    sampled, stuck = step_counts({"groups_sampled": len(groups), "groups_skipped": sum(g.skipped for g in groups),
                                  "groups_solved": ExplorationWatch(solved_reward=solved).solved(groups)})
    return stuck / max(sampled, 1)


def _batch_written(out: Path, started: float) -> dict[int, float]:
    """When each step's batch file was written (seconds since launch): the step's rewards were known then."""
    batches = {int(p.name.removeprefix("step_")): p / "batch.json" for p in (out / "steps").glob("step_*")}
    return {step: path.stat().st_mtime - started for step, path in sorted(batches.items()) if path.exists()}


def _add(cells: dict[str, list[float]], cls: Any, total: float, count: int = 1) -> None:
    """Add `count` rollouts whose rewards sum to `total` to class `cls`'s [sum, rollouts]."""
    cell = cells.setdefault(str(cls), [0.0, 0])
    cell[0], cell[1] = cell[0] + total, cell[1] + count


def looprl_class_rewards(out: Path, arg: str) -> ClassRewards:
    """A looprl run's train rewards per step and class, from its store (a failed rollout counts as 0)."""
    per: ClassRewards = {}
    with sqlite3.connect(f"file:{out / 'looprl.db'}?mode=ro", uri=True, timeout=5) as db:
        rows = db.execute("SELECT step, example_args, reward FROM rollouts WHERE split = 'train'").fetchall()
        for step, example, reward in rows:
            _add(per.setdefault(str(step), {}), json.loads(example)[arg], reward or 0.0)
    return per


def per_class_steps(out: Path, arg: str) -> list[str]:
    """A looprl run, step by step: the train reward per class of `arg` (on `large_number` the share of right answers
    on the no- and on the yes-questions, which shows a collapse onto one answer and its swings), the share of groups
    without signal, and what collapse recovery did after the step."""
    per, metrics = looprl_class_rewards(out, arg), _step_metrics(out)
    lines = []
    for step in sorted(per, key=int):
        m = metrics.get(int(step), {})
        classes = " ".join(f"{cls} {total / count:.2f}" for cls, (total, count) in sorted(per[step].items()))
        shown = ("raise", "decay", "give_up", "rollback", "rose", "entropy_off", "entropy_back")
        actions = [key for key in shown if m.get(f"collapse/{key}")]
        signal = f"{m['no_signal_frac']:.2f}" if "no_signal_frac" in m else "-"
        lines.append(f"step {step:>4}  {classes}  | groups without signal {signal}"
                     + (f"  | {', '.join(actions)}" if actions else ""))
    return lines


def trl_class_rewards(out: Path, arg: str, weights: dict[str, float]) -> ClassRewards:
    """A TRL run's train rewards per step and class, from the worker's `completions.jsonl` (one line per
    rollout and reward component, the components of a step's rollouts in the same order)."""
    path = out / "completions.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    parts: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for line in lines:
        parts.setdefault((line["step"], line["component"]), []).append(line)
    per: ClassRewards = {}
    for step in sorted({step for step, _ in parts}):
        components = {name: parts[(step, name)] for name in weights if (step, name) in parts}
        for i, first in enumerate(next(iter(components.values()))):
            total = sum(weights[name] * rows[i]["reward"] for name, rows in components.items())
            _add(per.setdefault(str(step), {}), first["example_args"][arg], total)
    return per


def run_trl(args: argparse.Namespace, seed: int, out: Path) -> list[Point]:
    """One TRL seed in its own process (so each pays its imports and model load, like a looprl run)."""
    subprocess.run(["rm", "-rf", str(out)], check=True)
    out.mkdir(parents=True)
    result = out / "points.json"
    command = [
        sys.executable,
        __file__,
        "--trl-worker",
        str(seed),
        "--task",
        args.task,
        "--lr",
        str(args.lr),
        "--budget-s",
        str(args.budget_s),
        "--out",
        str(out),
        *(["--stop-at", str(args.stop_at), "--stop-window", str(args.stop_window)] if args.stop_at else []),
    ]
    subprocess.run(
        command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=os.environ | {"TOKENIZERS_PARALLELISM": "false"}
    )
    return [(*p, None)[:4] for p in json.loads(result.read_text())]


def trl_config(task: str, seed: int, lr: float, out: Path) -> Any:
    from trl import GRPOConfig

    from looprl.config import RLConfig, load_config

    # looprl's resolved settings, so a key the task's rl.toml leaves to looprl's default is TRL's too
    cfg = load_config(RLConfig, ["@", str(TASKS[task] / "rl.toml")]).orchestrator
    return GRPOConfig(
        output_dir=str(out),
        # one group a micro-batch (~the tokens of looprl's packed micro-batch, orchestrator.token_budget 512), the
        # step's 64 rollouts generated at once and trained as one optimizer step: the whole batch in one pass
        # held full-vocabulary logits of ~10 GB, and two such lanes on this machine's 24 GB thrashed its memory
        per_device_train_batch_size=cfg.group_size,
        num_generations=cfg.group_size,
        gradient_accumulation_steps=cfg.batch_size // cfg.group_size,
        max_completion_length=cfg.sampling.max_tokens,
        mask_truncated_completions=cfg.mask_truncated,
        reward_weights=list(reward_weights(task).values()),
        temperature=cfg.base_temperature,
        loss_type="dapo",
        beta=0.0,
        learning_rate=lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_grad_norm=1.0,
        gradient_checkpointing=False,  # TRL's default is on: recomputing activations would only slow TRL down
        optim="adamw_torch_fused",
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        bf16=False,
        logging_steps=1,
        max_steps=10000,
        seed=seed,
    )


def trl_worker(args: argparse.Namespace) -> None:
    started = time.time()
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    from looprl.model_loading import DEFAULT_MODEL, resolve_model

    env = task_env(args.task)
    rows = train_payloads(args.task)
    fields = list(example_args(rows[0]))
    dataset = Dataset.from_list([{"prompt": r["prompt_messages"], **example_args(r)} for r in rows] * 50)
    scored_at: list[float] = []  # when each step's rewards were computed (generation done, before training)
    scored: dict[str, list[float]] = {}  # the last step's rewards, per component
    points: list[Point] = []
    out = Path(args.out)

    def component(name: str) -> Callable[..., list[float]]:
        def reward(completions, **columns):  # TRL passes the dataset's other columns by name
            scored_at.append(time.time() - started)
            example_args = [{f: columns[f][i] for f in fields} for i in range(len(completions))]
            rewards = [env.score(c[-1]["content"].strip(), a)[name] for c, a in zip(completions, example_args)]
            scored[name] = rewards
            with (out / "completions.jsonl").open("a") as f:  # per rollout, like looprl's store: which examples
                for a, r in zip(example_args, rewards):  # a policy gets right (one answer for all shows there)
                    f.write(json.dumps({"step": len(points) + 1, "component": name, "example_args": a,
                                        "reward": r}) + "\n")
            return rewards

        reward.__name__ = name
        return reward

    top = max_reward(args.task)
    stop_level = args.stop_at * top if args.stop_at else None
    weights = reward_weights(args.task)
    config = trl_config(args.task, args.trl_worker, args.lr, out)

    def step_stuck_share() -> float:  # TRL's step: its generation batch is its batch, a prompt's rollouts in a row
        per_rollout = zip(*(scored[c] for c in weights))  # each rollout's components, in `weights`' order
        totals = [sum(w * r for w, r in zip(weights.values(), rewards)) for rewards in per_rollout]
        return stuck_share(totals, config.num_generations, top)

    class Clock(TrainerCallback):
        def on_log(self, _args, state, control, logs=None, **kw):  # after on_step_end: its stop holds
            if logs and "reward" in logs:
                points.append((scored_at[-1], state.global_step, logs["reward"], step_stuck_share()))
                (out / "points.json").write_text(json.dumps(points))
                (out / "log_history.json").write_text(json.dumps(state.log_history))  # components, entropy
                if stop_level is not None and first_reached(points, stop_level, args.stop_window) is not None:
                    control.should_training_stop = True

        def on_step_end(self, _args, state, control, **kw):
            control.should_training_stop = time.time() - started > args.budget_s

    trainer = GRPOTrainer(
        model=str(resolve_model(DEFAULT_MODEL)),
        reward_funcs=[component(c) for c in weights],
        args=config,
        train_dataset=dataset,
        callbacks=[Clock()],
    )
    trainer.train()
    (out / "points.json").write_text(json.dumps(points))


# --- how the two runs differ -------------------------------------------------------------------


def recovery_bonus(collapse: CollapseRecovery) -> str:
    """Collapse recovery's entropy bonus, for the settings table ("": none)."""
    if collapse.method == "off" or not collapse.entropy_coef:
        return ""
    ceiling = "" if collapse.entropy_ceiling is None else \
        f" (off above {collapse.entropy_ceiling:g}x the first steps' entropy)"
    return f", {collapse.entropy_coef} from the first intervention{ceiling}"


def settings(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(setting, looprl, TRL) for every setting of the comparison, from looprl's resolved config and TRL's."""
    import torch

    from looprl.config import ClippedLoss, RLConfig, load_config
    from looprl.launch.rl_command import cpu_threads_per_process, local_gpu_count

    cfg = load_config(
        RLConfig,
        ["@", str(TASKS[args.task] / "rl.toml"), "--trainer.optim.lr", str(args.lr), *shlex.split(args.looprl_args)],
    ).for_hardware(local_gpu_count())
    trl = trl_config(args.task, 0, args.lr, Path(args.out) / "trl-settings")
    o, t, ratio = cfg.orchestrator, cfg.trainer, cfg.trainer.loss.ratio
    turns = "take turns" if o.off_policy_steps == 0 else "overlap"
    escalating = " then rollback" if o.collapse.method == "temperature" and o.collapse.escalate else ""
    looprl_ratio = (
        f"clipped eps {ratio.eps_low}/{ratio.eps_high}"
        if isinstance(ratio, ClippedLoss)
        else ", ".join(f"{k} {v}" for k, v in ratio.model_dump().items())
    )
    return [
        ("off-policy lag (steps)", str(o.off_policy_steps), "0"),
        (
            "CPU threads per process",
            f"{cpu_threads_per_process(o.off_policy_steps)} (engine and trainer {turns})",
            f"{torch.get_num_threads()} (one process)",
        ),
        ("ratio objective", looprl_ratio, f"clipped eps {trl.epsilon}/{trl.epsilon_high or trl.epsilon}"),
        ("loss normalisation", t.loss.normalization, {"dapo": "per_token"}.get(trl.loss_type, trl.loss_type)),
        ("advantage divided by group std", str(o.normalize_std), str(trl.scale_rewards in ("group", "batch", True))),
        ("learning rate", f"{t.optim.lr:g}", f"{trl.learning_rate:g}"),
        ("warm-up steps", str(t.optim.warmup_steps), str(trl.warmup_steps)),
        ("learning-rate schedule", t.optim.schedule, getattr(trl.lr_scheduler_type, "value", trl.lr_scheduler_type)),
        ("max grad norm", str(t.optim.max_grad_norm), str(trl.max_grad_norm)),
        ("weight decay", str(t.optim.weight_decay), str(trl.weight_decay)),
        ("Adam betas", str(tuple(t.optim.betas)), str((trl.adam_beta1, trl.adam_beta2))),
        ("Adam epsilon", f"{t.optim.eps:g}", f"{trl.adam_epsilon:g}"),
        ("KL coefficient", str(t.loss.kl_coef), str(trl.beta)),
        ("entropy bonus coefficient", f"{t.loss.entropy_coef}{recovery_bonus(o.collapse)}", "0.0"),
        ("collapse recovery", f"{o.collapse.method}{escalating} (looprl-recovery: temperature alone, "
                              "looprl-rollback: rollback)", "none"),
        (
            "rollouts per step / group / micro-batch",
            f"{o.batch_size}/{o.group_size}/{o.token_budget} tokens packed",
            f"{trl.generation_batch_size}/{trl.num_generations}/{trl.per_device_train_batch_size} rollouts",
        ),
        (
            "temperature / top_p / max tokens",
            f"{o.sampling.temperature}/{o.sampling.top_p or 1.0}/{o.sampling.max_tokens}",
            f"{trl.temperature}/{trl.top_p}/{trl.max_completion_length}",
        ),
        ("truncated completions trained", str(not o.mask_truncated), str(not trl.mask_truncated_completions)),
        ("activation checkpointing", "False", str(trl.gradient_checkpointing)),
        ("generation", "inference engine process, continuous batching", "model.generate in the training process"),
        ("example order", "looprl.orchestrator.example_order (seeded)", "TRL's RepeatSampler (seeded)"),
    ]


# --- the summary -------------------------------------------------------------------------------


def first_reached(points: Sequence[Point], level: float, window: int = 1) -> Point | None:
    """The first step whose reward, averaged with the `window - 1` steps before it, reached `level`.

    With 4 prompts per step the step's reward swings by several tenths from one step to the next, so
    one lucky step (window 1) says less than three steps in a row (window 3) about where a run is.
    """
    for i in range(window - 1, len(points)):
        if statistics.fmean(p[2] for p in points[i - window + 1 : i + 1]) >= level:
            return points[i]
    return None


def worst_drop(points: Sequence[Point], level: float) -> float | None:
    """Largest fall of the 3-step mean reward below its running peak, after the run first reached `level`."""
    start = next((i for i, p in enumerate(points) if p[2] >= level), None)
    if start is None:
        return None
    means = [statistics.fmean(p[2] for p in points[max(i - 2, 0) : i + 1]) for i in range(start, len(points))]
    peak, drop = means[0], 0.0
    for m in means:
        peak, drop = max(peak, m), max(drop, peak - m)
    return drop


def stuck_steps(points: Sequence[Point], top: float, every: bool = False) -> list[bool]:
    """Per step: most of its groups (`every`: all of them) without signal while the task is unsolved (the mean
    reward of the `STALL_WINDOW` steps ending there below `UNSOLVED` of `top`); False where the share is unknown."""
    out = []
    for i, p in enumerate(points):
        window = points[max(i - STALL_WINDOW + 1, 0) : i + 1]
        share = p[3] if len(p) > 3 else None  # older results.json: (seconds, step, reward)
        without = share is not None and (share >= 1 if every else share > 0.5)
        out.append(without and statistics.fmean(q[2] for q in window) < UNSOLVED * top)
    return out


def longest_stuck(points: Sequence[Point], top: float, every: bool = False) -> int:
    """The longest run of consecutive steps with most groups (`every`: all) without signal while unsolved."""
    longest = run = 0
    for stuck in stuck_steps(points, top, every):
        run = run + 1 if stuck else 0
        longest = max(longest, run)
    return longest


def stalled(points: Sequence[Point], top: float, every: bool = False) -> bool:
    """Whether `STALL_STEPS` of some `STALL_WINDOW` consecutive steps had most groups (`every`: all) without signal
    while unsolved."""
    stuck = stuck_steps(points, top, every)
    return any(sum(stuck[i : i + STALL_WINDOW]) >= STALL_STEPS for i in range(max(len(stuck) - STALL_WINDOW + 1, 1)))


def stalled_training_nothing(points: Sequence[Point], top: float) -> bool:
    """`stalled` by the issue's first reading: steps with every group without signal, which train nothing (a
    plateau where a few questions get the same wrong answer every time is not one)."""
    return stalled(points, top, every=True)


def balanced(per: ClassRewards | None, last: int = STALL_WINDOW) -> float | None:
    """The mean over classes of each class's mean reward over the run's `last` steps (None: not recorded)."""
    if not per:
        return None
    steps = sorted(per, key=int)[-last:]
    classes: dict[str, list[float]] = {}
    for step in steps:
        for cls, (total, count) in per[step].items():
            _add(classes, cls, total, int(count))
    return statistics.fmean(total / count for total, count in classes.values())


def spread(values: Sequence[float | None]) -> tuple[float | None, str]:
    """Median over seeds and `median [min-max] k/n`; a seed that never got there counts as infinitely late."""
    reached = sorted(v for v in values if v is not None)
    if not reached:
        return None, f"never 0/{len(values)}"
    median = statistics.median(reached + [float("inf")] * (len(values) - len(reached)))
    head = "never" if median == float("inf") else f"{median:.0f}"
    return (
        None if median == float("inf") else median
    ), f"{head} [{reached[0]:.0f}-{reached[-1]:.0f}] {len(reached)}/{len(values)}"


def _loads(results: dict[str, Any]) -> str:
    return ", ".join(f"{system} {load}" for system, load in results["load_average"].items())


def summarize(results: dict[str, Any]) -> list[str]:
    top = results["max_reward"]
    lines = [
        (
            f"task {results['task']} (maximum reward {top:g}), {results['seeds']} seed(s) per system,"
            f" budget {results['budget_s']:.0f} s, on {results.get('cpu', 'an unrecorded processor')},"
            f" load average during the runs: {_loads(results)}"
        )
    ]
    readings = ((1, "the step's train reward"), (MEAN_OF, f"the mean train reward of {MEAN_OF} steps in a row"))
    for window, what in readings:
        lines.append(f"first reached by {what}:")
        lines += _levels_table(results, window)
    # looprl makes several times TRL's steps in the same budget, so also over the steps every run made
    common = min((len(p) for runs in results["runs"].values() for p in runs), default=0)
    for system in systems_of(results):
        runs = results["runs"][system]
        drops = [worst_drop(points, 0.8 * top) for points in runs]
        early = [worst_drop(points[:common], 0.8 * top) for points in runs]
        known, known_early = [d for d in drops if d is not None], [d for d in early if d is not None]
        means = sorted(statistics.fmean(p[2] for p in points[:common]) for points in runs if common)
        lines.append(
            f"{system}: steps per run {[len(p) for p in runs]}"
            + (f"; mean train reward over the first {common} steps (as many as every run made):"
               f" {statistics.median(means):.3f} [{means[0]:.3f}-{means[-1]:.3f}]" if means else "")
            + (f"; worst drop of the 3-step mean after reaching 80 %: {max(known):.3f} over the whole run"
               + (f", {max(known_early):.3f} over the first {common} steps" if known_early else "")
               if known else "; no seed reached 80 %")
            + f"; longest run of steps without signal while unsolved: {[longest_stuck(p, top) for p in runs]}"
            + f", of steps that trained nothing: {[longest_stuck(p, top, every=True) for p in runs]}"
        )
    for system, per_seed in results.get("classes", {}).items():
        values = ["n/a" if b is None else f"{b:.2f}" for b in map(balanced, per_seed)]
        lines.append(f"{system}: reward averaged over the classes of `{CLASS_ARG[results['task']]}`, last"
                     f" {STALL_WINDOW} steps, per seed (one answer to every example: 0.50): {', '.join(values)}")
    differ = [s for s in results["settings"] if s[1] != s[2]]
    lines.append("settings in which the two runs differ (setting: looprl | TRL):")
    lines += [f"  {name}: {a} | {b}" for name, a, b in differ]
    same = [name for name, a, b in results["settings"] if a == b]
    lines.append("the same in both: " + ", ".join(same))
    return lines


def systems_of(results: dict[str, Any]) -> list[str]:
    """The systems a results.json holds runs of, in `SYSTEMS` order."""
    return [s for s in SYSTEMS if results["runs"].get(s)]


def _levels_table(results: dict[str, Any], window: int) -> list[str]:
    """Seconds and steps to each level, median [range] over seeds per system, and the looprl/TRL ratios."""
    top, systems = results["max_reward"], systems_of(results)
    header = (
        f"{'level':<14}"
        + "".join(f"{s + ' s':>24}" for s in systems)
        + f"{'ratio':>7}"
        + "".join(f"{s + ' steps':>22}" for s in systems)
        + f"{'ratio':>7}"
    )
    lines = [header]
    for share in LEVELS:
        level = share * top
        row = f"{f'{share:.0%} ({level:.2f})':<14}"
        for index in (0, 1):  # seconds, then steps
            medians = {}
            for system in systems:
                hits = [first_reached(points, level, window) for points in results["runs"][system]]
                medians[system], text = spread([h[index] if h else None for h in hits])
                row += f"{text:>{24 if index == 0 else 22}}"
            a, b = medians.get("looprl"), medians.get("trl")
            row += f"{(f'{a / b:.2f}x' if a is not None and b else 'n/a'):>7}"
        lines.append(row)
    return lines


def matrix(all_results: Sequence[dict[str, Any]]) -> list[str]:
    """The learning matrix: per task, the systems side by side, median and worst seed of the seconds to 80 %
    and 95 % of the maximum (the 3-step mean), of the longest run of steps without signal while unsolved,
    and the seeds that stalled (issue 37's criterion, by most groups and by every group without signal). The worst
    seed is what defaults are chosen by."""
    systems = [s for s in SYSTEMS if any(r["runs"].get(s) for r in all_results)]
    width = 18
    lines = [f"learning matrix ({MEAN_OF}-step mean reward; 'never': some seed did not get there in its budget)",
             f"{'task':<14}{'measure':<34}" + "".join(f"{s:>{width}}" for s in systems)]

    def seconds(share: float) -> Callable[[list[Point], float], float | None]:
        def reached(points: list[Point], top: float) -> float | None:
            hit = first_reached(points, share * top, MEAN_OF)
            return hit[0] if hit else None
        return reached

    def median_worst(values: Sequence[float | None]) -> str:
        if not values:
            return "–"
        known = [v for v in values if v is not None]
        ordered = sorted(known) + [float("inf")] * (len(values) - len(known))
        median = statistics.median(ordered)
        return " / ".join("never" if v == float("inf") else f"{v:.0f}" for v in (median, ordered[-1]))

    measures: list[tuple[str, Callable[[list[Point], float], Any]]] = [
        ("s to 80 % (median / worst)", seconds(0.8)),
        ("s to 95 % (median / worst)", seconds(0.95)),
        ("no-signal run, steps (median / worst)", longest_stuck),
        (f"seeds stalled ({STALL_STEPS} of {STALL_WINDOW} steps)", stalled),
        ("  ...steps that trained nothing", stalled_training_nothing),
    ]
    for results in all_results:
        top = results["max_reward"]
        for i, (name, measure) in enumerate(measures):
            cells = []
            for system in systems:
                runs = results["runs"].get(system, [])
                values = [measure(points, top) for points in runs]
                counted = measure in (stalled, stalled_training_nothing)
                cells.append(f"{sum(values)}/{len(values)}" if counted else median_worst(values))
            lines.append(f"{results['task'] if i == 0 else '':<14}{name:<34}" + "".join(f"{c:>{width}}" for c in cells))
        if "classes" in results:  # a lucky draw of prompts cannot move it (`CLASS_ARG`)
            cells = [median_worst_low([balanced(c) for c in results["classes"].get(system, [])]) for system in systems]
            name = f"class-balanced reward, last {STALL_WINDOW} steps"
            lines.append(f"{'':<14}{name:<34}" + "".join(f"{c:>{width}}" for c in cells))
    return lines


def median_worst_low(values: Sequence[float | None]) -> str:
    """`median / worst` of rewards (the worst is the lowest), over the seeds that recorded one."""
    known = sorted(v for v in values if v is not None)
    return f"{statistics.median(known):.2f} / {known[0]:.2f}" if known else "–"


def merge_lanes(files: Sequence[tuple[Path, dict[str, Any]]]) -> dict[Path, dict[str, Any]]:
    """Stored results by the folder of the first file of each, with the lanes of one comparison merged into one:
    systems measured each with its own --results-dir (in parallel, one a core) under the same protocol (`PROTOCOL`'s
    arguments, the processor and the settings compared), so that their tables set them side by side with the ratios
    and the matrix gives the task one row. Files whose systems overlap or whose protocol differs stay apart."""
    merged: dict[Path, dict[str, Any]] = {}
    for path, results in files:
        into = next((m for m in merged.values() if recorded_protocol(m) == recorded_protocol(results)
                     and m["settings"] == results["settings"] and not set(systems_of(m)) & set(systems_of(results))),
                    None)
        if into is None:
            merged[path.parent] = results
            continue
        for key in ("runs", "load_average", "classes"):
            if key in results:
                into[key] = {**into.get(key, {}), **results[key]}
        into["seeds"] = max(into["seeds"], results["seeds"])
    return merged


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for color, system in zip(("C0", "C2", "C1"), SYSTEMS):
        for i, points in enumerate(results["runs"].get(system, [])):
            label = system if i == 0 else None
            axes[0].plot(
                [p[0] for p in points], [p[2] for p in points], color=color, alpha=0.8, marker=".", label=label
            )
            axes[1].plot(
                [p[1] for p in points], [p[2] for p in points], color=color, alpha=0.8, marker=".", label=label
            )
    for ax, xlabel in zip(axes, ("seconds since launch", "step")):
        for share in LEVELS:
            ax.axhline(share * results["max_reward"], color="grey", lw=0.6, ls="--")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean train reward of the step")
    axes[0].legend()
    fig.suptitle(
        f"{results['task']}: {results['seeds']} seed(s) per system, load average {_loads(results)}"
        " (dashed: 50/80/95 % of the maximum)"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


PROTOCOL = ("task", "budget_s", "lr", "looprl_args", "stop_at", "stop_window", "first_seed")
"""The arguments a results.json's runs were measured under; with the processor (`cpu`), runs measured under
another protocol are not kept."""
UNRECORDED = {"stop_window": 1, "first_seed": 0}
"""The value of a protocol key that results of older runs lack."""


def recorded_protocol(results: dict[str, Any]) -> dict[str, Any]:
    """The protocol stored results were measured under: `PROTOCOL`'s arguments and the processor (`cpu`), a key
    older results lack read as `UNRECORDED` says (None where it says nothing, which matches no run's)."""
    return {key: results.get(key, UNRECORDED.get(key)) for key in (*PROTOCOL, "cpu")}


def cpu() -> str:
    """The machine's processor, its cores and whether it has AMX: seconds to a reward are this machine's (a step
    of TRL's on demo took 36 s on an Intel core with AMX, 70 s on an AMD EPYC core without), so seeds measured on
    another processor are not merged with them."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    names = re.findall(r"^model name\s*:\s*(.+)$", info, re.M)
    amx = "with AMX" if re.search(r"^flags\s*:.*\bamx_bf16\b", info, re.M) else "without AMX"
    return f"{names[0] if names else platform.processor() or 'unknown processor'}, {os.cpu_count()} cores, {amx}"


def run_systems(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """Run the seeds of each of `--systems` that `path` (a results.json) does not hold yet, writing it after
    every seed: the systems can be measured at different times (each on a quiet machine), and a matrix
    that takes longer than a sitting goes on where it stopped. Delete the file to measure again."""
    previous = json.loads(path.read_text()) if path.exists() else {}
    protocol = {key: getattr(args, key) for key in PROTOCOL} | {"cpu": cpu()}
    kept = recorded_protocol(previous) == protocol
    runs: dict[str, list[list[Point]]] = dict(previous["runs"]) if kept else {}
    classes: dict[str, list[ClassRewards | None]] = dict(previous.get("classes", {})) if kept else {}
    arg = CLASS_ARG.get(args.task)
    load_average: dict[str, str] = dict(previous["load_average"]) if kept else {}
    results = {**protocol, "max_reward": max_reward(args.task), "settings": settings(args)}
    for index in range(args.seeds):  # seed by seed, so that a matrix cut short holds every system's first seeds
        seed = args.first_seed + index
        for system in (s for s in args.systems if len(runs.setdefault(s, [])) <= index):
            before = os.getloadavg()[0]
            run_dir = Path(args.out) / args.task / f"{system}-{seed}"
            points = (run_trl(args, seed, run_dir) if system == "trl"
                      else run_looprl(args, seed, run_dir, system))
            runs[system].append(points)
            if arg:
                per = (trl_class_rewards(run_dir, arg, reward_weights(args.task)) if system == "trl"
                       else looprl_class_rewards(run_dir, arg))
                known = classes.setdefault(system, [])
                known += [None] * (index - len(known))  # seeds measured before classes were recorded
                known.append(per)
            low, high = (float(x) for x in load_average.get(system, f"{before}-{before}").split("-"))
            after = os.getloadavg()[0]
            load_average[system] = f"{min(low, before, after):.1f}-{max(high, before, after):.1f}"
            print(f"{args.task} {system} seed {seed}: " + " ".join(f"{p[0]:.0f}s/{p[1]}:{p[2]:.2f}" for p in points),
                  flush=True)
            results |= {"seeds": max(len(r) for r in runs.values()), "load_average": load_average, "runs": runs,
                        **({"classes": classes} if arg else {})}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results))
    return json.loads(path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=["demo"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds FIRST_SEED.. (a second lane's seeds, kept in"
                        " its own --results-dir)")
    parser.add_argument("--budget-s", type=float, default=600)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--out", default="runs/bench-learning", help="the runs' directories (OUT/TASK/SYSTEM-SEED)")
    parser.add_argument("--results-dir", help="where each task's TASK/results.json is kept (default: OUT); the"
                        " learning matrix keeps them in the repository, bench/results/matrix")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=["looprl", "trl"],
                        help="looprl-recovery / looprl-rollback: looprl with collapse recovery's method set "
                             "([orchestrator.collapse], method temperature without escalation / rollback)")
    parser.add_argument("--looprl-args", default="", help="extra `looprl rl` overrides (ablations)")
    parser.add_argument("--stop-at", type=float, help="stop a seed (looprl's or TRL's) once a step's reward reached"
                        " this share of the maximum (e.g. 0.95; an ablation measuring time to a level needs no more)")
    parser.add_argument("--stop-window", type=int, default=1, help="with --stop-at: the mean of this many steps in"
                        " a row must reach it (3 on a binary task, where one step's prompts can all be right by luck)")
    parser.add_argument("--plot", help="PNG path (default: OUT/TASK/learning.png; one task only)")
    parser.add_argument("--summarize", nargs="+", help="print the summaries, plots and matrix of results.json files, "
                        "run nothing")
    parser.add_argument("--per-class", nargs="+", metavar="RUN_DIR", help="print looprl runs step by step: the train "
                        "reward per class of the first of --tasks with classes (large_number), the share of groups "
                        "without signal, collapse recovery's actions; run nothing")
    parser.add_argument("--task", help=argparse.SUPPRESS)  # the TRL worker's task
    parser.add_argument("--trl-worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.trl_worker is not None:
        return trl_worker(args)
    if args.per_class:
        arg = next((CLASS_ARG[t] for t in args.tasks if t in CLASS_ARG), None)
        if arg is None:
            parser.error(f"--per-class needs a task with classes in --tasks: {', '.join(sorted(CLASS_ARG))}")
        for run in args.per_class:
            print("\n".join([run, *per_class_steps(Path(run), arg)]))
        return None
    done = []
    stored = merge_lanes([(Path(f), json.loads(Path(f).read_text())) for f in args.summarize or []])
    for task in args.tasks if not args.summarize else stored:
        if args.summarize:
            out, results = task, stored[task]
        else:
            out = Path(args.out) / task
            kept = Path(args.results_dir or args.out) / task / "results.json"
            results = run_systems(argparse.Namespace(**{**vars(args), "task": task}), kept)
        print("\n".join(summarize(results)), flush=True)
        plot(results, Path(args.plot) if args.plot and len(done) == 0 else out / "learning.png")
        done.append(results)
    print("\n".join(matrix(done)))


if __name__ == "__main__":
    main()
