"""Each trainer rank's resident memory while it builds and shards the policy and the KL reference model, as
`trainer.loop` does (`load_policy` on the meta device on every rank but 0, then `parallel.prepare`): the CPU
stand-in for a GPU node's host RAM, where 8 ranks each loading a 7B model whole is 224 GB."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.gloo_ranks import run_ranks
from tests.support.memory import peak_rss_growth_mib

PHASES = ("policy", "reference")


def setup_peaks(model: str, out: Path, world_size: int = 2, meta: bool = True) -> list[dict[str, float]]:
    """Per rank, in MiB: `base` (resident before the model), the peak growth above the resident size at the
    start of each phase (`policy`, `reference`) and `peak` (the process's highest resident size). `meta=False`:
    every rank loads the whole model, as before meta-device init (the figures to compare with)."""
    out.mkdir(parents=True, exist_ok=True)
    run_ranks(_measure, model, str(out), meta, world_size=world_size)
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(world_size)]


def _measure(rank: int, model: str, out: str, meta: bool) -> None:
    from looprl.trainer import parallel
    from looprl.trainer.model import as_reference, load_policy

    ranks = parallel.setup("cpu", "bfloat16")
    _import_what_loading_imports(model)
    figures = {"base": _resident_mib()}
    peak = figures["base"]
    kept = []  # each phase's model stays alive, as the trainer keeps both

    def build(phase: str) -> None:
        built, _ = load_policy(model, on_meta=ranks.on_meta and meta)
        kept.append(parallel.prepare(as_reference(built) if phase == "reference" else built, ranks))

    for phase in PHASES:
        start = _resident_mib()
        figures[phase] = peak_rss_growth_mib(lambda phase=phase: build(phase))
        peak = max(peak, start + figures[phase])
        ranks.barrier()
    figures["peak"] = peak
    Path(out, f"rank{rank}.json").write_text(json.dumps(figures))
    parallel.teardown(ranks)


def _import_what_loading_imports(model: str) -> None:
    """The modules the first load imports (transformers' model classes, torch's distributed checkpointing:
    ~100 MiB, the same whatever the model's size), so that each phase's growth is the model's memory."""
    import torch.distributed.checkpoint.state_dict
    import torch.distributed.fsdp  # noqa: F401
    from transformers import AutoConfig, AutoModelForCausalLM

    from looprl.model_loading import resolve_model

    AutoModelForCausalLM._model_mapping[type(AutoConfig.from_pretrained(resolve_model(model)))]  # imports the class


def _resident_mib() -> float:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024
