"""The rl config: shipped TOML files parse, cross-field checks name the key, --dry-run writes the resolved file."""

import tomllib
from pathlib import Path

import pytest

from looprl.cli import main
from looprl.config import RLConfig, load_config, read_run_config
from looprl.errors import UserError

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted(ROOT.glob("examples/**/rl*.toml"))


def test_there_are_shipped_rl_configs():
    assert SHIPPED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_rl_config_parses(path):
    cfg = load_config(RLConfig, ["@", str(path)])
    assert cfg.env.source and cfg.max_steps >= 1


def test_batch_size_must_be_whole_groups():
    with pytest.raises(UserError, match="orchestrator: Value error, batch_size"):
        load_config(RLConfig, ["--env.source", "x.py:E", "--orchestrator.batch_size", "10",
                               "--orchestrator.group_size", "4"])


def test_unknown_keys_name_their_path():
    with pytest.raises(UserError, match=r"orchestrator.groupsize"):
        load_config(RLConfig, ["--env.source", "x.py:E", "--orchestrator.groupsize", "4"])


def test_dry_run_writes_the_resolved_config_and_it_reads_back(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("looprl.launch.rl_command.local_gpu_count", lambda: 0)
    out = tmp_path / "run"
    status = main(["rl", "@", str(ROOT / "examples/demo/rl.toml"), "--max_steps", "2", "--orchestrator.group_size", "4",
                   "--output_dir", str(out), "--dry-run"])
    assert status == 0 and "config.toml" in capsys.readouterr().out
    written = tomllib.loads((out / "config.toml").read_text())
    assert written["max_steps"] == 2 and written["orchestrator"]["group_size"] == 4
    expected = load_config(RLConfig, ["@", str(ROOT / "examples/demo/rl.toml"), "--max_steps", "2",
                                      "--orchestrator.group_size", "4", "--output_dir", str(out)])
    assert read_run_config(out) == expected.for_hardware(0)
    assert not (out / "looprl.db").exists()


def test_a_run_directory_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "looprl.db").touch()
    status = main(["rl", "@", str(ROOT / "examples/demo/rl.toml"), "--output_dir", str(tmp_path)])
    assert status == 2 and "--resume" in capsys.readouterr().err


def test_resume_needs_a_run(tmp_path, capsys):
    """Before its first checkpoint a run resumes from step 0 (`test_resume`); without a run there is nothing to
    resume."""
    status = main(["rl", "@", str(ROOT / "examples/demo/rl.toml"), "--output_dir", str(tmp_path), "--resume"])
    assert status == 2 and "no run to resume" in capsys.readouterr().err


@pytest.mark.parametrize("gpus,lag", [(0, 0), (1, 1), (8, 1)])
def test_the_off_policy_lag_left_unset_follows_the_hardware(gpus, lag):
    """Without a GPU the engine and the trainer share the cores and take turns (lag 0); with GPUs they overlap."""
    cfg = load_config(RLConfig, ["--env.source", "x.py:E"])
    assert cfg.orchestrator.max_off_policy_steps is None
    assert cfg.for_hardware(gpus).orchestrator.off_policy_steps == lag


@pytest.mark.parametrize("gpus,dtype", [(0, "float32"), (8, "bfloat16")])
def test_the_engine_dtype_left_auto_follows_the_hardware(gpus, dtype):
    """vLLM's LoRA kernels and FlashAttention take bfloat16, not float32: `auto` is bfloat16 with GPUs."""
    cfg = load_config(RLConfig, ["--env.source", "x.py:E"])
    assert cfg.inference.dtype == "auto" and cfg.for_hardware(gpus).inference.dtype == dtype
    kept = load_config(RLConfig, ["--env.source", "x.py:E", "--inference.dtype", "float32"])
    assert kept.for_hardware(8).inference.dtype == "float32"


def test_an_off_policy_lag_the_config_sets_is_kept():
    cfg = load_config(RLConfig, ["--env.source", "x.py:E", "--orchestrator.max_off_policy_steps", "2"])
    assert cfg.for_hardware(0).orchestrator.off_policy_steps == 2


def test_the_run_config_holds_the_lag_looprl_rl_chose(tmp_path, monkeypatch):
    """The orchestrator reads the run's config.toml: the launcher writes the lag it resolved there."""
    monkeypatch.setattr("looprl.launch.rl_command.local_gpu_count", lambda: 0)
    status = main(["rl", "@", str(ROOT / "examples/demo/rl.toml"), "--output_dir", str(tmp_path), "--dry-run"])
    assert status == 0
    assert tomllib.loads((tmp_path / "config.toml").read_text())["orchestrator"]["max_off_policy_steps"] == 0
    assert read_run_config(tmp_path).orchestrator.off_policy_steps == 0


def test_advantages_are_divided_by_the_group_std_unless_a_config_says_not():
    """The default that won on examples/two_digit; the demo's config turns it off (docs/benchmarks.md)."""
    assert load_config(RLConfig, ["--env.source", "x.py:E"]).orchestrator.normalize_std
    assert not load_config(RLConfig, ["@", str(ROOT / "examples/demo/rl.toml")]).orchestrator.normalize_std


@pytest.mark.parametrize("overrides,handoff", [
    ([], "shared_memory"),  # looprl rl starts the embedded engine on this host
    (["--inference.backend", "vllm"], "file"),
    (["--inference.urls", '["http://other-host:8000"]'], "file"),
    (["--slurm.train_nodes", "1", "--slurm.inference_nodes", "1"], "file"),
    (["--trainer.weight_handoff", "file"], "file"),
])
def test_the_weight_handoff_left_auto_is_shared_memory_only_with_the_embedded_engine_here(overrides, handoff):
    cfg = load_config(RLConfig, ["--env.source", "x.py:E", *overrides])
    assert cfg.for_hardware(0).trainer.weight_handoff == handoff


@pytest.mark.parametrize("overrides", [["--inference.backend", "vllm"],
                                       ["--slurm.train_nodes", "1", "--slurm.inference_nodes", "1"],
                                       # an engine started by hand cannot name the run's region in --weights-dir
                                       ["--inference.urls", '["http://127.0.0.1:8000"]']])
def test_shared_memory_is_refused_where_the_engine_loads_files(overrides):
    with pytest.raises(UserError, match="weight_handoff"):
        load_config(RLConfig, ["--env.source", "x.py:E", "--trainer.weight_handoff", "shared_memory", *overrides])
