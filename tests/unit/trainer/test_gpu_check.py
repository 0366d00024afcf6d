"""`bench/gpu_check.sh --smoke`: every stage of the first GPU run's check runs on the CPU (tiny random model,
gloo) and reports; so the GPU run cannot fail for a reason a CPU would have shown. And its bootstrap on a bare
image: wheels missing or built from other sources are refused before anything runs (`make device-check` runs
the whole bootstrap in a bare venv; it downloads too much for the suite)."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
SECTIONS = ("rl", "fsdp_tokens_per_s", "fsdp", "checkpoint", "recompiles", "mismatch", "block_mask", "tokens_per_s",
            "peak_mem")


@pytest.mark.slow  # starts `looprl rl` and torchrun, compiles flex_attention and the block mask: minutes
@pytest.mark.timeout(1560)
def test_the_smoke_run_reports_every_stage(tmp_path):
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "bench/gpu_check.sh"), "--smoke", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=1530)
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
    # `looprl rl` itself in bf16, one trainer process with the embedded engine: two steps, finite losses
    assert report["rl"]["steps"] == 2 and "--trainer.dtype bfloat16" in report["rl"]["command"]
    assert all(report["rl"]["samples_trained"])  # each step trained (coin-flip rewards: no group skipped)
    # train_step's throughput on the FSDP path, under torchrun with two gloo ranks
    sharded = report["fsdp_tokens_per_s"]
    assert sharded["world_size"] == 2 and sharded["all_dtensors"] and sharded["trainer_tokens_per_s"] > 0


@pytest.fixture
def bare_python(tmp_path):
    """An interpreter without looprl's requirements, as on a bare GPU image."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    return str(tmp_path / "bare" / "bin" / "python")


def run_check(python: str, wheels: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": python, "LOOPRL_DEVICE_WHEELS": str(wheels)}
    env.pop("PYTHONPATH", None)
    return subprocess.run(["bash", str(ROOT / "bench/gpu_check.sh"), "--smoke", "--out", str(tmp_path / "r.json")],
                          env=env, capture_output=True, text=True, timeout=60)


def test_a_bare_image_without_wheels_is_told_to_run_make_device_wheels(bare_python, tmp_path):
    done = run_check(bare_python, tmp_path / "none", tmp_path)
    assert done.returncode == 2 and "make device-wheels" in done.stderr and not (tmp_path / "r.json").exists()


def test_wheels_built_from_other_sources_are_refused(bare_python, tmp_path):
    """The folder's SOURCE is the digest of src/ it was built from; another digest means a stale looprl wheel."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "SOURCE").write_text("0" * 64 + "\n")
    done = run_check(bare_python, wheels, tmp_path)
    assert done.returncode == 2 and "other sources than src/" in done.stderr


def bench_module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_source_digest_follows_every_file_under_src(tmp_path):
    source_digest = bench_module("device_wheels").source_digest
    (tmp_path / "src" / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "a.py").write_text("x = 1\n")
    first = source_digest(tmp_path)
    (tmp_path / "src" / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"cache")
    assert source_digest(tmp_path) == first
    (tmp_path / "src" / "pkg" / "a.py").write_text("x = 2\n")
    assert source_digest(tmp_path) != first


def test_a_stage_past_its_limit_ends_with_its_whole_process_group(tmp_path):
    """`looprl rl` and torchrun start processes of their own: a stage that overruns takes them all down, so none
    keeps the GPU's memory from the stages after it."""
    marker = tmp_path / "grandchild"
    command = ["bash", "-c", f"sleep 60 >/dev/null 2>&1 & echo $! > {marker}; wait"]
    done = bench_module("gpu_check").run_child(command, 1)
    assert done.returncode < 0 and "stopped after 1 s" in done.stdout
    status = Path(f"/proc/{int(marker.read_text())}/status")
    for _ in range(50):  # a killed process may still be on its way out for a moment
        try:
            if "State:\tZ" in status.read_text():  # a zombie awaiting its reaper
                return
        except FileNotFoundError:  # gone
            return
        time.sleep(0.1)
    raise AssertionError("the grandchild outlived its stage")
