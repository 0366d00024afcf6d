"""Data parallel on the CPU (gloo, FSDP2): two ranks take the same optimizer steps as one process.

Each rank computes its share of the micro-batches (balanced by tokens), with zero-weight padding
passes where it has fewer; the step's loss normalisation is global, so after two steps on the same
batch the gathered parameters equal the single-process ones, and rank 0 reports every rollout's
logprobs, as one process does.
"""

import pytest
import torch
from tests.support.gloo_ranks import run_ranks
from tests.support.tiny_model import tiny_model

from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample
from looprl.trainer import parallel
from looprl.trainer.loss import clipped
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.rollout_logprobs import RolloutLogprobs
from looprl.trainer.step import train_step
from looprl.trainer.weight_files import full_state_dict


def _samples() -> list[TrainingSample]:
    out = []
    for i, length in enumerate([9, 7, 12, 8, 10]):  # 5 micro-batches: ranks get 3 and 2 (one padding pass)
        ids = [(7 * i + j) % 60 + 2 for j in range(length)]
        mask = [False] * 2 + [True] * (length - 2)
        out.append(TrainingSample(rollout_id=f"r{i}", token_ids=ids, loss_mask=mask,
                                  inference_logprobs=[-3.0] * length, advantage=1.0 if i % 2 else -0.5))
    return out


def _train(ranks: parallel.Ranks) -> dict[str, torch.Tensor] | None:
    model = parallel.prepare(tiny_model(), ranks)
    optimizer = build_optimizer(model, lr=1e-2)
    scheduler = build_scheduler(optimizer)
    micro_batches = pack(_samples(), 12)
    assert len(micro_batches) == 5
    for _ in range(2):
        collected = RolloutLogprobs()
        metrics = train_step(model, optimizer, scheduler, micro_batches, clipped.token_loss, ranks=ranks,
                             rollout_logprobs=collected)
    reported = collected.gather(ranks)
    state = full_state_dict(model, ranks)
    if state is None:
        assert reported is None
        return None
    assert reported is not None and sorted(reported) == [f"r{i}" for i in range(5)]
    logprobs = {f"_logprobs/{r}": torch.tensor(v) for r, v in reported.items()}
    return {**state, **logprobs, "_loss": torch.tensor(metrics["loss"])}


def _rank(rank: int, out: str) -> None:
    ranks = parallel.setup("cpu", "float32")
    state = _train(ranks)
    if state is not None:
        torch.save(state, out)
    parallel.teardown(ranks)


def test_micro_batches_are_balanced_by_tokens():
    assert parallel.assign([10, 1, 9, 2, 5], 2) == [[0, 1, 3], [2, 4]]  # 13 and 14 tokens
    assert parallel.assign([4], 3) == [[0], [], []]


@pytest.mark.timeout(120)
@pytest.mark.slow  # two torch processes and a gloo group: ~15 s on an idle machine
def test_two_gloo_ranks_equal_one_process(tmp_path):
    out = tmp_path / "two_ranks.pt"
    run_ranks(_rank, str(out))
    two = torch.load(out)
    one = _train(parallel.Ranks())
    assert one is not None and set(one) == set(two)
    for name, tensor in one.items():
        torch.testing.assert_close(two[name], tensor, atol=1e-5, rtol=1e-5, msg=name)
