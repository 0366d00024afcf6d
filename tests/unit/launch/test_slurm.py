"""The SLURM sbatch script: rendering, and its job and node commands run locally with SLURM's
variables set (stand-ins for `srun` and `scontrol`; a real two-node torchrun rendezvous on localhost)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from looprl.errors import UserError
from looprl.launch.slurm import SlurmConfig, render_sbatch, write_sbatch
from looprl.paths import log_path, logs_dir, torchrun_log_dir

FAKE_SRUN = """#!/bin/bash
# srun stand-in: runs --ntasks copies of the command here, each with its SLURM_PROCID and SLURMD_NODENAME.
ntasks=1
while [[ "$1" == --* ]]; do case "$1" in --ntasks=*) ntasks="${1#*=}" ;; esac; shift; done
pids=()
for ((i = 0; i < ntasks; i++)); do SLURM_PROCID=$i SLURMD_NODENAME=node$i "$@" & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null' TERM
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
"""
FAKE_SCONTROL = """#!/bin/bash
printf 'localhost\\ntrain-b\\ninfer-a\\ninfer-b\\n'
"""
TRAINER = ("import os\nsecret = ' with the run secret' if os.environ.get('LOOPRL_RUN_SECRET') else ''\n"
           "print(f\"trainer rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}{secret}\", flush=True)\n")
SECRET = "s3cret-of-the-run"
"""What `run_job` puts in the run's secret file (`looprl rl` makes it before it writes the script)."""


def commands(trainer_script: Path) -> dict[str, list[str]]:
    return {
        "orchestrator": [sys.executable, "-c",
                         "import os; print('orchestrator sees', os.environ['LOOPRL_INFERENCE_URLS'], "
                         "os.environ['MASTER_ADDR']);"
                         " print('orchestrator secret', os.environ.get('LOOPRL_RUN_SECRET'))"],
        "trainer": [str(trainer_script)],
        "inference": [sys.executable, "-c",
                      "import os, sys; print('engine on inference node', os.environ['LOOPRL_NODE_RANK'], 'gpus',"
                      " os.environ.get('CUDA_VISIBLE_DEVICES'), *sys.argv[1:]);"
                      " print('engine secret', os.environ.get('LOOPRL_RUN_SECRET'))"],
    }


def test_render_the_sbatch_script(tmp_path):
    cfg = SlurmConfig(train_nodes=2, inference_nodes=3, partition="gpu", account="rl", time="02:00:00",
                      setup=["source /opt/venv/bin/activate"], sbatch_args=["--constraint=h100"])
    script = render_sbatch(cfg, tmp_path / "out dir", orchestrator=["python", "-m", "looprl.orchestrator"],
                           trainer=["-m", "looprl.trainer", "@", "config.toml"], inference=["looprl", "inference"])
    for line in ("#SBATCH --nodes=5", "#SBATCH --gpus-per-node=8", "#SBATCH --partition=gpu", "#SBATCH --account=rl",
                 "#SBATCH --time=02:00:00", "#SBATCH --exclusive", "#SBATCH --constraint=h100",
                 "source /opt/venv/bin/activate"):
        assert line in script.splitlines()
    assert "--nproc-per-node=8" in script and "--rdzv-backend=static" in script
    assert "-m looprl.trainer @ config.toml" in script
    assert f"--log-dir='{torchrun_log_dir((tmp_path / 'out dir').resolve())}'" in script
    assert "ln -sfn trainer/node_0.log" in script and "ln -sfn inference/node_0.log" in script
    assert "#SBATCH --qos" not in script
    with pytest.raises(UserError):
        render_sbatch(cfg, tmp_path, orchestrator=[], trainer=["x"], inference=["y"])


def run_job(tmp_path: Path, out: Path, engines_per_node: int = 1, **env: str) -> None:
    """Run the job's script here, with stand-ins for `srun` and `scontrol`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    trainer_script = tmp_path / "train.py"
    trainer_script.write_text(TRAINER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = SlurmConfig(train_nodes=2, inference_nodes=2, gpus_per_node=engines_per_node, rdzv_port=port,
                      inference_port=8123)
    path = write_sbatch(render_sbatch(cfg, out, **commands(trainer_script), engines_per_node=engines_per_node), out)
    (out / "run_secret").write_text(SECRET + "\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "localhost,train-b,infer-[a-b]", **env}
    proc = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow  # the whole sbatch script, its fake nodes as processes
def test_the_job_runs_every_node_with_the_seed_log_layout(tmp_path):
    out = tmp_path / "run"
    run_job(tmp_path, out)
    assert log_path(out, "trainer").is_symlink() and os.readlink(log_path(out, "trainer")) == "trainer/node_0.log"
    assert os.readlink(log_path(out, "inference")) == "inference/node_0.log"
    assert "[default0]:trainer rank 0 of 2" in log_path(out, "trainer").read_text()
    assert "[default0]:trainer rank 1 of 2" in (logs_dir(out) / "trainer/node_1.log").read_text()
    assert "engine on inference node 0" in log_path(out, "inference").read_text()
    assert "engine on inference node 1" in (logs_dir(out) / "inference/node_1.log").read_text()
    assert ("orchestrator sees http://infer-a:8123/v1,http://infer-b:8123/v1 localhost"
            in log_path(out, "orchestrator").read_text())
    rank_logs = sorted(p.read_text() for p in torchrun_log_dir(out).rglob("stdout.log"))
    assert rank_logs == ["trainer rank 0 of 2\n", "trainer rank 1 of 2\n"]


def test_rl_dry_run_with_slurm_keys_writes_the_sbatch_script(tmp_path):
    root = Path(__file__).resolve().parents[3]
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "looprl.cli", "rl", "@", "examples/demo/rl.toml",
                           "--output_dir", str(run),
                           "--slurm.train_nodes", "2", "--slurm.inference_nodes", "1", "--dry-run"],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    path = run.resolve() / "rl.sbatch"
    assert proc.stdout.strip() == f"wrote {path}"
    script = path.read_text()
    assert "#SBATCH --nodes=3" in script.splitlines() and 'torchrun --nnodes="$TRAIN_NODES"' in script
    assert f"-m looprl.trainer {run.resolve()} --resume-step 0" in script
    assert 'tee -a "$LOGS/trainer/node_$LOOPRL_NODE_RANK.log"' in script and "ln -sfn trainer/node_0.log" in script
    assert "looprl.orchestrator" in script and "--engine-url" in script and (run / "config.toml").is_file()
    assert "ENGINES_PER_NODE=8" in script and "-m looprl.inference" in script  # the embedded engine: one per GPU


@pytest.mark.slow  # the whole sbatch script, its fake nodes as processes
def test_one_embedded_engine_per_gpu_of_each_inference_node(tmp_path):
    """The embedded engine computes on one GPU: each inference node runs one per GPU of SLURM's allocation,
    on consecutive ports, and the orchestrator sees every one of them."""
    out = tmp_path / "run"
    run_job(tmp_path, out, engines_per_node=2, CUDA_VISIBLE_DEVICES="4,5")
    node_0 = log_path(out, "inference").read_text()
    assert "[gpu 0] engine on inference node 0 gpus 4 --host node0 --port 8123" in node_0
    assert "[gpu 1] engine on inference node 0 gpus 5 --host node0 --port 8124" in node_0
    node_1 = (logs_dir(out) / "inference/node_1.log").read_text()
    assert "[gpu 1] engine on inference node 1 gpus 5 --host node1 --port 8124" in node_1
    urls = "http://infer-a:8123/v1,http://infer-a:8124/v1,http://infer-b:8123/v1,http://infer-b:8124/v1"
    assert f"orchestrator sees {urls} localhost" in log_path(out, "orchestrator").read_text()


FAKE_PYTHON = """#!/bin/bash
# python stand-in: every engine is healthy (`-c` checks), the orchestrator prints its command line.
if [ "$1" = "-c" ]; then echo "health $3" >> "$(dirname "$0")/health"; exit 0; fi
echo "$@"
"""


def test_vllm_on_both_inference_nodes_and_the_orchestrator_given_both(tmp_path, monkeypatch):
    """The acceptance command: vLLM in a GPU dtype, once per inference node over its 8 GPUs (data parallel:
    SmolLM2's 9 heads allow no tensor parallelism across 8), and the orchestrator given both nodes."""
    from looprl.cli import main
    from looprl.config import read_run_config
    from looprl.inference.backends import run_engine
    from looprl.launch.slurm import slurm_commands

    root = Path(__file__).resolve().parents[3]
    run = (tmp_path / "run").resolve()
    monkeypatch.chdir(root)
    assert main(["rl", "@", "examples/demo/rl.toml", "--output_dir", str(run), "--inference.backend", "vllm",
                 "--inference.vllm_python", "/opt/vllm/bin/python", "--slurm.train_nodes", "1",
                 "--slurm.inference_nodes", "2", "--slurm.gpus_per_node", "8", "--dry-run"]) == 0
    script = (run / "rl.sbatch").read_text()
    assert "ENGINES_PER_NODE=1" in script and '--relative="$TRAIN_NODES"' in script and "INFERENCE_NODES=2" in script
    assert f"-m looprl.inference {run} --gpus 8 --host \"$SLURMD_NODENAME\" --port \"$INFERENCE_PORT\"" in script
    cfg = read_run_config(run)
    assert (cfg.inference.backend, cfg.inference.dtype) == ("vllm", "bfloat16")
    engine = run_engine(cfg, host="infer-a", port=8000, gpus=8)  # what each inference node runs
    try:
        command = " ".join(engine.command())
    finally:
        engine.stop()
    assert "-m vllm.entrypoints.openai.api_server" in command and "--dtype bfloat16" in command
    assert "--data-parallel-size 8" in command and "--tensor-parallel-size" not in command

    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    [_, _, orchestrator] = slurm_commands(str(fake), run, cfg, 0)["orchestrator"]
    env = {**os.environ, "LOOPRL_INFERENCE_URLS": "http://infer-a:8000/v1,http://infer-b:8000/v1"}
    proc = subprocess.run(["bash", "-c", orchestrator], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["-m", "looprl.orchestrator", str(run), "--engine-url", "http://infer-a:8000",
                                   "http://infer-b:8000", "--model-name", "smollm2-135m-instruct", "--resume-step", "0"]
    assert (tmp_path / "health").read_text().split() == ["health", "http://infer-a:8000/health",
                                                         "health", "http://infer-b:8000/health"]


def test_vllm_replicas_that_do_not_fill_a_node_are_refused_when_the_job_is_written(tmp_path, capsys):
    from looprl.cli import main

    root = Path(__file__).resolve().parents[3]
    status = main(["rl", "@", str(root / "examples/demo/rl.toml"), "--output_dir", str(tmp_path / "run"),
                   "--inference.backend", "vllm", "--inference.tensor_parallel_size", "3", "--slurm.gpus_per_node", "8",
                   "--dry-run"])
    error = capsys.readouterr().err
    assert status == 2 and "inference.tensor_parallel_size = 3 must divide slurm.gpus_per_node = 8" in error
    assert not (tmp_path / "run" / "rl.sbatch").exists()
