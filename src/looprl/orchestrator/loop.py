"""The orchestrator process: the RL loop's data side, read top to bottom.

For each step N (from 1):

1. Bound the lag: wait until the engine runs weights version >= N - 1 - max_off_policy_steps. With
   the default of 1, generating step N overlaps the trainer's step N-1.
2. Every `eval.interval` steps from step 1 (whose eval measures the initial model), and after the
   last step, evaluate on the eval split.
3. Rollouts: the first `batch_size / group_size` groups of sibling rollouts to finish, from a pool
   that keeps groups running across step boundaries (`inflight.GroupPool`); groups that started on
   weights more than `max_off_policy_steps` behind are dropped (stored, counted, not trained). The
   gateway records every model call with its token ids and logprobs.
4. Rewards -> advantages: components weighted into a total (zero-filled across the batch), reward
   minus the group's mean, divided by the group's std with `normalize_std` (the default); failed
   rollouts stay out of the loss unless `include_failed`, and a group with one trains the rest unless
   `failed_group = "drop"` (a group whose rollouts all failed is out); groups with no non-zero advantage are
   skipped and counted (`no_signal_frac`; most groups so for several steps in a row: a warning,
   `session.collapse`; with `[orchestrator.collapse]` the trainer rolls back to weights that still explored
   at a lower learning rate (that step trains nothing, and groups the collapsed policy sampled are stale
   from then on), or the next groups sample hotter until groups regain signal: `session.collapse_recovery`).
   With `dynamic_sampling` such groups are replaced by new ones in step 3, up to `max_extra_groups` per
   step (`groups_sampled`, `groups_kept`).
5. Samples from the recorded calls, packed by token budget into `steps/step_N/batch.json`.
6. Store: the rollouts at once (before the batch is handed over), each with the components it was
   zero-filled on; the step's metrics, and the trainer's logprobs on the calls it trained, when the
   trainer's report for step N arrives (the metrics kept in
   `steps/step_N/orchestrator.json` meanwhile, so a crash cannot lose them: `--resume` stores what
   it finds missing). Each stored step's metrics also go to the `[log.trackers]`.

Env servers, gateway, store writer and reward totals are the run's `RolloutSession`
(`looprl.session`); env code runs in env server worker processes, never on this process's event loop.
Every example drawn is in the prompt ledger (`orchestrator.ledger`) from the moment its group starts,
and settled (trained, skipped, filtered, stale, failed) with the step's rollouts, before the batch: a
`--resume` from checkpoint K goes on from the ledger, drawing again what was in flight or settled after
K. Failures: `failed_group` decides whether a group with a failed rollout trains the rest (step 4),
and `max_consecutive_failures` failed rollouts in a row stop the run (`orchestrator.failure_streak`).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

from looprl.config import RLConfig, SamplingParams
from looprl.gateway.app import Gateway
from looprl.handoff import TrainBatch, TrainerReport, await_model, read_model, write_model
from looprl.handoff.files import POLL_S, write_atomic
from looprl.orchestrator.example_order import ExampleOrder
from looprl.orchestrator.failure_streak import FailureStreak
from looprl.orchestrator.inflight import GroupPool, Landed
from looprl.orchestrator.ledger import PromptLedger, outcome, resume_order, stale_why
from looprl.orchestrator.packing import pack
from looprl.orchestrator.step_metrics import first_request, lag_metrics, rollout_metrics, summary_line
from looprl.orchestrator.token_versions import oldest_version, token_lag_metrics
from looprl.orchestrator.training_samples import build_samples, loss_calls, per_call
from looprl.orchestrator.weight_sync import WeightSync
from looprl.paths import batch_path, progress_path, rollout_metrics_path, trainer_report_path
from looprl.session import Group, RolloutSession
from looprl.session.advantages import GroupAdvantages, batch_advantages
from looprl.session.collapse import ExplorationWatch
from looprl.session.collapse_recovery import CollapseRecovery, explored
from looprl.session.rewards import UnusedWeights, mark_zero_filled, reward_stats
from looprl.store.reader import RunStoreReader
from looprl.trackers import TrackedRun, Trackers, inspector_link, open_trackers
from looprl.utils.logger import get_logger


class Orchestrator:
    def __init__(self, cfg: RLConfig, run_dir: Path, engine_urls: list[str], model_name: str,
                 secret: str | None = None) -> None:
        """`engine_urls`: the root URL of each engine serving the policy (requests spread over them);
        `secret`: the run secret they require."""
        self.cfg, self.run_dir = cfg, Path(run_dir)
        sampling = cfg.orchestrator.sampling
        if sampling.seed is None:
            sampling = sampling.model_copy(update={"seed": cfg.seed})
        gateway = Gateway([f"{url}/v1" for url in engine_urls], model_name, sampling, cfg.orchestrator.context_budget,
                          api_key=secret)
        self.weights = WeightSync(engine_urls, self.run_dir, last_version=cfg.max_steps, on_model=gateway.serve_model,
                                  secret=secret, in_flight=cfg.orchestrator.in_flight_updates)
        self.session = RolloutSession(
            self.run_dir, kind="rl", env=cfg.env_runtime(), gateway=gateway, config=cfg.model_dump(mode="json"),
            splits=(cfg.env.train_split, cfg.env.eval_split), model=cfg.model.name,
            timeout_s=cfg.orchestrator.timeout_s, reward_weights=cfg.orchestrator.reward_weights)
        self.session.summary = {"steps": cfg.max_steps}
        self.pending: dict[int, dict[str, Any]] = {}
        self.loss_calls: dict[str, list[tuple[int, int]]] = {}
        """Per rollout trained and not yet stored: `(call idx, completion tokens)` its loss tokens came from."""
        self.unused_weights = UnusedWeights(cfg.orchestrator.reward_weights)
        self.trackers = Trackers()
        """`[log.trackers]`: each stored step's metrics go to them too (started when the run starts)."""
        self.exploration = ExplorationWatch(solved_reward=cfg.orchestrator.collapse.solved_reward)
        """Warns when most groups carried no signal for several steps in a row (`session.collapse`)."""
        self.failures = FailureStreak(cfg.orchestrator.max_consecutive_failures)
        self.ledger: PromptLedger | None = None
        self.warned_all_masked = False
        """Whether a step has trained nothing for `orchestrator.mask_truncated` yet (said once a run)."""
        self.draws: dict[str, tuple[int, int]] = {}
        """Each group in flight's draw, `(epoch, position)` by group id: a step hands the trainer its groups in
        draw order, not the order they finished in, so two runs of one seed train on the same batch."""
        recovery = cfg.orchestrator.recovery
        if note := cfg.orchestrator.recovery_note:
            get_logger().warning(note)
        self.recovery = CollapseRecovery(recovery, cfg.orchestrator.base_temperature) if recovery else None
        """`[orchestrator.collapse]`: the temperature of the groups started next (`session.collapse_recovery`)."""

    async def run(self, resume_step: int) -> None:
        cfg, session = self.cfg, self.session
        try:
            async with session:
                self.trackers = await asyncio.to_thread(  # a tracker's start may take seconds (W&B's service)
                    open_trackers, cfg.log.trackers,
                    TrackedRun(self.run_dir.resolve().name, self.run_dir, session.run_id, cfg.model_dump(mode="json")))
                order = await self._example_order(resume_step)
                assert session.writer is not None
                self.ledger = PromptLedger(session.writer, session.run_id, order)
                pool: GroupPool[Group] = GroupPool(self.launch_group, lambda: self.weights.version,
                                                   cfg.orchestrator.groups_per_step, cfg.orchestrator.off_policy_steps,
                                                   oldest_version,
                                                   poll_s=POLL_S if cfg.orchestrator.in_flight_updates else None)
                step = resume_step
                try:
                    for step in range(resume_step + 1, cfg.max_steps + 1):
                        await self.step(step, order, pool)
                        self.flush_reports()
                finally:
                    await pool.cancel()
                    await self.ledger.cancel(f"the run ended at step {step} while its group generated")
                await self.finish()
        finally:
            self.trackers.finish()
            get_logger().info("orchestrator {}", session.status)

    async def _example_order(self, resume_step: int) -> ExampleOrder:
        cfg, session = self.cfg, self.session
        dataset = await session.dataset(cfg.env.train_split, cfg.env.max_train_examples)
        state = None
        assert session.writer is not None
        session.writer.delete_steps_after(session.run_id, resume_step)  # a resume (k = 0: before any checkpoint)
        if resume_step:
            self.recover_steps(resume_step)
            self.resume_collapse_watch(resume_step)
            state = json.loads(progress_path(self.run_dir, resume_step).read_text()).get("sampler")
            await self.weights.wait_for(resume_step)  # the trainer broadcasts its restored weights
        reader = RunStoreReader(self.run_dir)
        try:
            entries = reader.ledger(session.run_id)
        finally:
            reader.close()
        if entries and entries[-1].epoch_size != len(dataset):
            get_logger().warning("the train split has {} examples, the prompt ledger's epochs {}: its positions name "
                                 "other examples now (env.max_train_examples or the data changed), so the resumed "
                                 "epoch may repeat or skip some", len(dataset), entries[-1].epoch_size)
        order = resume_order(dataset, cfg.seed, entries, state)
        if resume_step:
            undone = sum(e.undone_at == resume_step for e in entries)
            get_logger().info("resumed after step {}: engine on weights version {}, example order at {} (epoch {}), "
                              "{} draws after the checkpoint undone and drawn again", resume_step, self.weights.version,
                              order.position, order.epoch + 1, undone)
        return order

    @property
    def sampling(self) -> SamplingParams | None:
        """The sampling of the train groups started next: None (the run's) unless collapse recovery has moved
        the temperature off the run's."""
        if self.recovery is None or self.recovery.sampled_as_configured:
            return None
        return self.session.gateway.sampling.model_copy(update={"temperature": self.recovery.temperature})

    async def launch_group(self) -> Group:
        """Draw the next example (recorded in the prompt ledger) and roll out its group."""
        assert self.ledger is not None
        draw, group_id = await self.ledger.draw()
        self.draws[group_id] = (draw.epoch, draw.position)
        return await self.session.roll_out(draw.example, "train", self.cfg.orchestrator.group_size, group_id=group_id,
                                            sampling=self.sampling, seed_key=f"train/{draw.epoch}/{draw.position}")

    async def step(self, step: int, order: ExampleOrder, pool: GroupPool[Group]) -> None:
        cfg, ocfg = self.cfg, self.cfg.orchestrator
        started = time.perf_counter()
        await self.weights.wait_for(max(0, step - 1 - ocfg.off_policy_steps, pool.floor))
        metrics: dict[str, Any] = {"wait_time_s": time.perf_counter() - started}
        if ocfg.eval.interval and (step - 1) % ocfg.eval.interval == 0 and step != cfg.max_steps:
            metrics.update(await self.evaluate(step))

        # 1. rollouts: the first whole groups of siblings to finish, fresh enough for this step
        gen_start = time.perf_counter()
        dynamic = ocfg.dynamic_sampling
        landed = await pool.collect(step, prefetch=step < cfg.max_steps, before_top_up=self.weights.sync,
                                    keep=self.has_signal if dynamic else None,
                                    max_extra=dynamic.max_extra_groups if dynamic else 0)
        metrics["gen_time_s"] = time.perf_counter() - gen_start
        sampled = self.in_draw_order(landed.fresh) + self.in_draw_order(landed.filtered)
        for g in sampled + landed.stale:
            self.draws.pop(g.group[0][0].group_id, None)
        groups = [g.group for g in sampled]
        metrics.update(lag_metrics(step, [(g.policy_version, first_request(g.group)) for g in sampled],
                                   self.weights.published_at, self.weights.loaded_at))
        metrics["groups_dropped"] = float(len(landed.stale))
        metrics["rollouts_dropped"] = float(sum(len(g.group) for g in landed.stale))
        metrics["tokens_dropped"] = float(sum(c.completion_tokens for g in landed.stale for _, calls in g.group
                                              for c in calls))

        # 2. rewards and advantages per group; zero-advantage groups carry no signal
        results = [[r for r, _ in group] for group in groups]
        self.unused_weights.check(step, [r for group in results for r in group])
        advantages = batch_advantages(results, ocfg)

        watched, has_signal = self.watch(step, groups, advantages)
        metrics.update(watched)
        rolled_back = bool(metrics.get("collapse/rollback"))
        if rolled_back:  # nothing the collapsed policy sampled trains; the groups after it need the restored weights
            pool.floor = step

        # 3. training samples from the recorded calls, packed into micro-batches for the trainer
        samples, records, breaks, outcomes, masked = [], [], 0, [], 0
        for i, (landed_group, group, adv) in enumerate(zip(sampled, groups, advantages)):
            trained = False
            for (result, calls), reward, advantage in zip(group, adv.rewards, adv.advantages):
                if advantage is not None and not adv.skipped and not rolled_back:
                    built = build_samples(result.rollout_id, calls, advantage, landed_group.started_version)
                    samples += built
                    breaks += max(0, len(built) - 1)
                    if built:
                        trained = True
                        self.loss_calls[result.rollout_id] = loss_calls(calls)
                records.append(self.session.record(result, calls, step, reward,
                                                   None if adv.skipped or rolled_back else advantage))
            masked += 0 if rolled_back else adv.masked
            what, why = outcome(adv, [r for r, _ in group], trained, filtered=i >= len(landed.fresh),
                                rolled_back=rolled_back)
            outcomes.append((group[0][0].group_id, what, why))
        mark_zero_filled(records)  # the batch; dropped groups are in none
        micro_batches = pack(samples, ocfg.token_budget)
        metrics.update(token_lag_metrics(step, samples, groups))
        dropped = [self.session.record(r, calls, step, self.session.score(r))
                   for g in landed.stale for r, calls in g.group]
        outcomes += [(g.group[0][0].group_id, "stale", stale_why(g.policy_version, step, ocfg.off_policy_steps,
                                                                 pool.floor)) for g in landed.stale]
        await self.session.write(records + dropped)
        assert self.ledger is not None
        await self.ledger.settle(step, outcomes)
        self.failures.check([r for g in sampled + landed.stale for r, _ in g.group], self.run_dir,
                            self.session.env_name)

        metrics.update(rollout_metrics(records, ocfg.reward_weights))
        metrics["samples"], metrics["micro_batches"] = float(len(samples)), float(len(micro_batches))
        metrics["sample_breaks"] = float(breaks)
        if ocfg.mask_truncated:
            metrics["rollouts_masked"] = float(masked)
            if masked and not samples and not self.warned_all_masked:
                self.warned_all_masked = True
                get_logger().warning(
                    f"step {step} trained nothing: its {masked} replies with a learning signal were cut off by a "
                    "length limit beside finished replies that scored their group's mean (output_exceeded: "
                    "orchestrator.sampling.max_tokens, here "
                    f"{ocfg.sampling.max_tokens}; context_exceeded: the model's context), and "
                    "orchestrator.mask_truncated leaves such replies out of the loss; raise the limit or set "
                    "mask_truncated = false (said once a run)")
        metrics["step_time_s"] = time.perf_counter() - started
        self.pending[step] = metrics
        # Rollouts and metrics are on disk before the trainer can start the step, so a checkpoint of
        # step N implies both (a crash after it loses nothing: `recover_steps`).
        write_atomic(rollout_metrics_path(self.run_dir, step), json.dumps(metrics))
        write_model(batch_path(self.run_dir, step),
                    TrainBatch(step=step, micro_batches=micro_batches, explored=has_signal,
                               rollback=rolled_back,
                               entropy_coef=self.recovery.entropy_coef if self.recovery else 0.0,
                               progress={"sampler": order.state()}))

    def in_draw_order(self, groups: list[Landed[Group]]) -> list[Landed[Group]]:
        """`groups` in the order their examples were drawn (those of unknown draw last, as they came)."""
        return sorted(groups, key=lambda g: self.draws.get(g.group[0][0].group_id, (math.inf, math.inf)))

    def watch(self, step: int, groups: list[Group],
              advantages: list[GroupAdvantages]) -> tuple[dict[str, float], bool]:
        """The step's counts of groups without signal, the collapse warning when the watch fires, and collapse
        recovery's decision (before the batch is built: a rollback step trains nothing); with whether most of
        the step's groups had signal (`explored`: the trainer keeps the weights of such steps to go back to)."""
        metrics = {"groups_skipped": float(sum(a.skipped and not a.failed for a in advantages)),
                   "groups_failed": float(sum(a.failed for a in advantages)), "groups_sampled": float(len(groups))}
        metrics["groups_kept"] = metrics["groups_sampled"] - metrics["groups_skipped"] - metrics["groups_failed"]
        metrics["no_signal_frac"] = metrics["groups_skipped"] / max(len(groups), 1)
        solved = self.exploration.solved(advantages)
        metrics["groups_solved"] = float(solved)
        if overshoot := self.exploration.overshoot():
            get_logger().warning(overshoot)
        stuck = int(metrics["groups_skipped"]) - solved
        fired = self.exploration.observe(step, len(groups), stuck)
        if fired:
            example = next((g[0][0].rollout_id for g, a in zip(groups, advantages) if a.skipped and g), None)
            get_logger().warning(self.exploration.warning(
                step, len(groups), stuck,
                example and f"{example}: {inspector_link(self.run_dir, self.session.run_id, example)}"))
        has_signal = explored(len(groups), int(metrics["groups_kept"]), self.exploration.share)
        if self.recovery:
            has_signal = has_signal and self.recovery.sampled_as_configured
            reward = reward_stats([r for g in groups for r, _ in g], self.cfg.orchestrator.reward_weights)["reward"]
            metrics.update(self.recover(step, fired, len(groups), stuck, reward, has_signal))
        return metrics, has_signal

    def recover(self, step: int, fired: bool, sampled: int, stuck: int, reward: float,
                has_signal: bool) -> dict[str, float]:
        """Collapse recovery after `step` (`reward`: its `reward` metric): the sampling of the groups started from
        now on, its log line and its `collapse/...` metrics."""
        assert self.recovery is not None
        intervention = self.recovery.after_step(step, self.exploration, fired, sampled, stuck, reward, has_signal)
        if intervention:
            log = get_logger().info if intervention.action == "decay" else get_logger().warning
            log(intervention.line())
        self.flush_reports()  # the trainer's last entropy, for the bonus (its report comes after the weights)
        switch = self.recovery.steer_bonus(step)
        if switch:
            get_logger().info(switch.line())
        return (self.recovery.metrics() | (intervention.metrics() if intervention else {})
                | (switch.metrics() if switch else {}))

    def has_signal(self, group: Group) -> bool:
        """Whether a group's advantages are not all zero (dynamic sampling keeps only those)."""
        return not batch_advantages([[r for r, _ in group]], self.cfg.orchestrator)[0].skipped

    async def evaluate(self, step: int) -> dict[str, float]:
        """Rollouts on the first `eval.num_examples` eval examples with the engine's current weights."""
        cfg, ecfg, session = self.cfg, self.cfg.orchestrator.eval, self.session
        if not ecfg.num_examples:
            return {}
        await self.weights.sync()
        examples = await session.dataset(cfg.env.eval_split, ecfg.num_examples)
        groups = await asyncio.gather(*(session.roll_out(e, "eval", ecfg.rollouts_per_example,
                                                         seed_key=f"eval/{step}/{e.id}") for e in examples))
        records = [session.record(r, calls, step, session.score(r)) for group in groups for r, calls in group]
        mark_zero_filled(records)
        await session.write(records)
        self.failures.check([r for group in groups for r, _ in group], self.run_dir, session.env_name)
        stats = rollout_metrics(records, session.reward_weights)
        keep = [k for k in stats if k.startswith("reward") or k == "pass_rate" or k == "completion_len"]
        return {f"eval/{k}": stats[k] for k in keep} | {"eval/policy_version": float(self.weights.version)}

    def flush_reports(self) -> None:
        """Store every pending step whose trainer report has arrived, in order."""
        for step in sorted(self.pending):
            report = read_model(trainer_report_path(self.run_dir, step), TrainerReport)
            if report is None:
                return
            self.store_step(step, report)

    def resume_collapse_watch(self, resume_step: int) -> None:
        """Pick the collapse watch and recovery up where the stored steps up to `resume_step` left them: the streak
        of steps without signal, the best and worst reward so far, the recovery's settings, stall window, and
        whether it gave up (else a resumed run would start counting afresh, or step in again after giving up)."""
        reader = RunStoreReader(self.run_dir)
        try:
            steps = reader.steps(self.session.run_id)
            rewards = reader.reward_range(self.session.run_id, "train", up_to_step=resume_step)
        finally:
            reader.close()
        self.exploration.resume(steps, rewards)
        if self.recovery and steps:
            self.recovery.resume(resume_step, steps, self.exploration)

    def recover_steps(self, resume_step: int) -> None:
        """Store the steps up to `resume_step` whose metrics a crash kept from the store (their
        rollouts are stored: they are written before the step's batch)."""
        reader = RunStoreReader(self.run_dir)
        try:
            stored = {row["step"] for row in reader.steps(self.session.run_id)}
            for step in range(1, resume_step + 1):
                report = read_model(trainer_report_path(self.run_dir, step), TrainerReport)
                path = rollout_metrics_path(self.run_dir, step)
                if step not in stored and report is not None and path.is_file():
                    self.pending[step] = json.loads(path.read_text())
                    self.loss_calls.update({r: loss_calls(reader.model_calls(r)) for r in report.rollout_logprobs})
                    self.store_step(step, report)
        finally:
            reader.close()

    def store_step(self, step: int, report: TrainerReport) -> None:
        metrics = self.pending.pop(step) | {f"train/{k}": v for k, v in report.metrics.items()}
        if self.recovery:
            self.recovery.note_entropy(step, report.metrics.get("entropy", math.nan),
                                       report.metrics.get("loss_tokens", 0.0))
        assert self.session.writer is not None
        self.session.writer.write_step(self.session.run_id, step, metrics)
        self.trackers.log(step, metrics)
        self.session.writer.write_trainer_logprobs(
            (rollout_id, idx, values) for rollout_id, logprobs in report.rollout_logprobs.items()
            for idx, values in per_call(self.loss_calls.pop(rollout_id, []), logprobs) or [])
        get_logger().info(summary_line(step, metrics))

    async def finish(self) -> None:
        """Wait for the trainer's last reports and weights, evaluate them, store the remaining steps."""
        last = self.cfg.max_steps
        for step in sorted(self.pending):
            report = await await_model(trainer_report_path(self.run_dir, step), TrainerReport)
            if step == last:
                await self.weights.wait_for(last)
                self.pending[step].update(await self.evaluate(step))
            self.store_step(step, report)
