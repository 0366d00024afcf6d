"""`bench/gpu_check.sh --smoke`: every stage of the first GPU run's check runs on the CPU (tiny random model,
gloo, one rank) and reports; so the GPU run cannot fail for a reason a CPU would have shown."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SECTIONS = ("fsdp", "checkpoint", "recompiles", "mismatch", "block_mask", "tokens_per_s", "peak_mem")


@pytest.mark.slow  # compiles flex_attention and the block mask on the CPU: minutes on a busy machine
@pytest.mark.timeout(900)
def test_the_smoke_run_reports_every_stage(tmp_path):
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "bench/gpu_check.sh"), "--smoke", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=880)
    report = json.loads(out.read_text())
    assert done.returncode == 0, report["errors"] or done.stderr[-3000:]
    assert set(SECTIONS) <= set(report) and report["smoke"] and not report["errors"]
    assert all(report[stage]["ok"] for stage in SECTIONS if stage != "peak_mem")
    assert set(report["peak_mem"]["gib"]) == set(SECTIONS) - {"peak_mem"}
    fsdp, checkpoint = report["fsdp"], report["checkpoint"]
    assert fsdp["all_dtensors"] and fsdp["state_dict_keys_equal"] and len(fsdp["grad_norms"]) == 2
    assert checkpoint["optimizer_equal"] and checkpoint["rng_restored"] and checkpoint["optimizer_tensors"] > 0
    # the KL path (policy in train mode, reference in eval mode) compiles nothing new on a second pass
    assert report["recompiles"]["compiled_first_pass"] > 0 and report["recompiles"]["compiled_second_pass"] == 0
    assert report["mismatch"]["engine_dtype"] == "torch.bfloat16" and report["mismatch"]["mismatch_kl"] < 1e-3
    assert report["block_mask"]["tokens"] == 32768 and report["peak_mem"]["gib"]["block_mask"] < 0.25
    assert report["tokens_per_s"]["trainer_tokens_per_s"] > 0 and report["tokens_per_s"]["engine_tokens_per_s"] > 0
