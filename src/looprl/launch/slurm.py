"""SLURM: the sbatch script of a multi-node `looprl rl` run (the `[slurm]` table is `config.SlurmConfig`).

    script = render_sbatch(cfg.slurm, output_dir, **slurm_commands(sys.executable, run_dir, cfg, resume_step),
                           engines_per_node=engines_per_node(cfg))
    path = write_sbatch(script, output_dir)        # {output_dir}/rl.sbatch (all that --dry-run does)
    job_id = submit_sbatch(path)                   # sbatch --parsable

Node roles (SLURM node ids of the job): `0 .. train_nodes-1` run the trainer under torchrun (one
agent per node; a static rendezvous on the first node, so global ranks follow node order and
`trainer.log`, node 0's local rank 0, is global rank 0; `--log-dir logs/trainer/torchrun`);
the next `inference_nodes` run the configured engine (`python -m looprl.inference RUN_DIR`, which
reads `inference.backend`, `inference.dtype` and LoRA from the run's config.toml): vLLM once per
node over all its GPUs (`--gpus`: tensor x data parallel), or the embedded engine once per GPU (each
seeing one, on ports `inference_port`, `inference_port + 1`, ...); the orchestrator (with its env
servers) runs in the batch step on the first node, waits until every engine answers `/health`, and
is given them all (it spreads the rollouts over them and sends each weight update to every one).
The script calls itself on every node through `srun ... bash rl.sbatch trainer|inference`, which
finds its node rank in `SLURM_PROCID`, so the output directory must be on a filesystem all nodes
share (it holds the logs anyway).

Every process sees `LOOPRL_OUTPUT_DIR`, `MASTER_ADDR`, `MASTER_PORT` (the trainer rendezvous) and
`LOOPRL_INFERENCE_URLS` (comma-separated `http://HOST:PORT/v1` of every engine); trainer
and inference nodes also see `LOOPRL_NODE_RANK`. The engines and the orchestrator get the run secret
(`LOOPRL_RUN_SECRET`), which the script reads from `{output_dir}/run_secret` (written by `looprl rl`,
0600) on each node, so it is in no command line and not in the script; the trainer's nodes
drop it. Each engine binds its node's address (`--host $SLURMD_NODENAME`, the name the orchestrator
calls it by), not every interface, and refuses every request but `/health` that lacks the secret.
Logs, as in the single-node layout:
`trainer/node_N.log` (torchrun with local rank 0's output), `inference/node_N.log` (several engines
on a node: each line prefixed `[gpu I]`),
`orchestrator.log`, and the symlinks `trainer.log -> trainer/node_0.log`,
`inference.log -> inference/node_0.log`.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from looprl.config import RLConfig
from looprl.config.deployment import SlurmConfig
from looprl.errors import UserError
from looprl.handoff.engine_access import SECRET_ENV
from looprl.paths import log_path, logs_dir, secret_path, torchrun_log_dir

SBATCH_NAME = "rl.sbatch"


def slurm_commands(python: str, run_dir: Path, cfg: RLConfig, resume_step: int) -> dict[str, list[str]]:
    """The `looprl rl` processes as `render_sbatch` takes them: the orchestrator waits for every
    inference engine's `/health`, then is given them all."""
    resume = ["--resume-step", str(resume_step)]
    q = shlex.quote
    health = f'{q(python)} -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1])"'
    orchestrator = (
        'IFS=, read -ra urls <<< "$LOOPRL_INFERENCE_URLS"; roots=("${urls[@]%/v1}"); '
        f'for root in "${{roots[@]}}"; do until {health} "$root/health" 2>/dev/null; do sleep 2; done; done; '
        f'exec {q(python)} -m looprl.orchestrator {q(str(run_dir))} --engine-url "${{roots[@]}}" '
        f'--model-name {q(cfg.model.name)} {shlex.join(resume)}')
    inference = [python, "-m", "looprl.inference", str(run_dir)]  # `render_sbatch` adds the node's address
    gpus = cfg.slurm.gpus_per_node if cfg.slurm is not None else 0
    if cfg.inference.backend == "vllm" and gpus:
        inference += ["--gpus", str(gpus)]
    return {
        "orchestrator": ["bash", "-c", orchestrator],
        "trainer": ["-m", "looprl.trainer", str(run_dir), *resume],
        "inference": inference,
    }


def engines_per_node(cfg: RLConfig) -> int:
    """vLLM: one server over all of a node's GPUs; the embedded engine, which computes on one GPU: one per GPU."""
    gpus = cfg.slurm.gpus_per_node if cfg.slurm is not None else 0
    return max(1, gpus) if cfg.inference.backend == "embedded" else 1


def _sbatch_lines(cfg: SlurmConfig, output_dir: Path) -> list[str]:
    options = [f"--job-name={cfg.job_name}", f"--nodes={cfg.train_nodes + cfg.inference_nodes}",
               "--ntasks-per-node=1", f"--time={cfg.time}", f"--output={output_dir}/slurm-%j.out"]
    if cfg.gpus_per_node:
        options.append(f"--gpus-per-node={cfg.gpus_per_node}")
    for flag, value in (("partition", cfg.partition), ("account", cfg.account), ("qos", cfg.qos),
                        ("cpus-per-task", cfg.cpus_per_task), ("mem", cfg.mem)):
        if value is not None:
            options.append(f"--{flag}={value}")
    if cfg.exclusive:
        options.append("--exclusive")
    return [f"#SBATCH {option}" for option in [*options, *cfg.sbatch_args]]


def render_sbatch(cfg: SlurmConfig, output_dir: Path, *, orchestrator: Sequence[str], trainer: Sequence[str],
                  inference: Sequence[str], engines_per_node: int = 1) -> str:
    """The sbatch script of a run.

    `orchestrator` and `inference` are command lines; `trainer` is what follows torchrun's own options
    (`["-m", "looprl.trainer", ...]` or `["train.py", ...]`). Each is quoted for the shell as given;
    processes read the run's addresses from the environment variables in the module docstring.
    Each inference node runs `inference --port PORT` `engines_per_node` times, on consecutive ports
    from `cfg.inference_port`; with more than one, each sees one of the node's GPUs
    (`CUDA_VISIBLE_DEVICES`: the I-th of SLURM's allocation, else I).
    """
    if not (orchestrator and trainer and inference):
        raise UserError("render_sbatch needs orchestrator, trainer and inference commands")
    out = Path(output_dir).resolve()
    q = shlex.quote
    logs = logs_dir(out)
    return "\n".join([
        "#!/bin/bash",
        f"# looprl rl on SLURM: {cfg.train_nodes} trainer node(s), {cfg.inference_nodes} inference node(s).",
        "# Submit with `sbatch rl.sbatch`; nodes run it again as `bash rl.sbatch trainer|inference`.",
        *_sbatch_lines(cfg, out),
        "set -uo pipefail",
        "",
        f"export LOOPRL_OUTPUT_DIR={q(str(out))}",
        f"export {SECRET_ENV}=\"$(< {q(str(secret_path(out)))})\"  # the run secret: never on a command line",
        f"LOGS={q(str(logs))}",
        f"SCRIPT={q(str(out / SBATCH_NAME))}",
        f"TRAIN_NODES={cfg.train_nodes}",
        f"INFERENCE_NODES={cfg.inference_nodes}",
        f"ENGINES_PER_NODE={engines_per_node}",
        f"INFERENCE_PORT={cfg.inference_port}",
        *cfg.setup,
        "",
        "run_trainer() {",
        f"  unset {SECRET_ENV}  # the trainer talks to no engine",
        "  export LOOPRL_NODE_RANK=$SLURM_PROCID",
        f"  mkdir -p \"$LOGS/trainer\" {q(str(torchrun_log_dir(out)))}",
        f"  torchrun --nnodes=\"$TRAIN_NODES\" --nproc-per-node={max(cfg.gpus_per_node, 1)} "
        "--node-rank=\"$LOOPRL_NODE_RANK\" \\",
        "    --rdzv-backend=static --master-addr=\"$MASTER_ADDR\" --master-port=\"$MASTER_PORT\" "
        "--rdzv-id=\"looprl-$SLURM_JOB_ID\" \\",
        f"    --log-dir={q(str(torchrun_log_dir(out)))} --redirects=3 --tee=3 --local-ranks-filter=0 \\",
        f"    {shlex.join(trainer)} 2>&1 | tee -a \"$LOGS/trainer/node_$LOOPRL_NODE_RANK.log\"",
        "}",
        "",
        "run_inference() {",
        "  export LOOPRL_NODE_RANK=$SLURM_PROCID",
        "  mkdir -p \"$LOGS/inference\"",
        *_engines(inference, engines_per_node),
        "}",
        "",
        "run_job() {",
        "  mapfile -t hosts < <(scontrol show hostnames \"$SLURM_JOB_NODELIST\")",
        f"  export MASTER_ADDR=\"${{hosts[0]}}\" MASTER_PORT={cfg.rdzv_port}",
        "  urls=()",
        "  for host in \"${hosts[@]:$TRAIN_NODES:$INFERENCE_NODES}\"; do",
        "    for ((i = 0; i < ENGINES_PER_NODE; i++)); do urls+=(\"http://$host:$((INFERENCE_PORT + i))/v1\"); done",
        "  done",
        "  export LOOPRL_INFERENCE_URLS=$(IFS=,; echo \"${urls[*]}\")",
        "  mkdir -p \"$LOGS/trainer\" \"$LOGS/inference\"",
        f"  ln -sfn trainer/node_0.log {q(str(log_path(out, 'trainer')))}",
        f"  ln -sfn inference/node_0.log {q(str(log_path(out, 'inference')))}",
        "  srun --nodes=\"$INFERENCE_NODES\" --ntasks=\"$INFERENCE_NODES\" --relative=\"$TRAIN_NODES\" "
        "--ntasks-per-node=1 bash \"$SCRIPT\" inference &",
        "  inference_pid=$!",
        "  srun --nodes=\"$TRAIN_NODES\" --ntasks=\"$TRAIN_NODES\" --relative=0 --ntasks-per-node=1 "
        "bash \"$SCRIPT\" trainer &",
        "  trainer_pid=$!",
        f"  {shlex.join(orchestrator)} >> {q(str(log_path(out, 'orchestrator')))} 2>&1 &",
        "  orchestrator_pid=$!",
        "  wait -n \"$orchestrator_pid\" \"$trainer_pid\"",
        "  status=$?",
        "  if [ \"$status\" -eq 0 ]; then",
        "    wait \"$orchestrator_pid\"; orchestrator_status=$?",
        "    wait \"$trainer_pid\"; trainer_status=$?",
        "    status=$(( orchestrator_status ? orchestrator_status : trainer_status ))",
        "  fi",
        "  kill \"$inference_pid\" \"$trainer_pid\" \"$orchestrator_pid\" 2>/dev/null",
        "  wait",
        "  echo \"looprl rl: job finished with status $status (logs in $LOGS)\"",
        "  exit \"$status\"",
        "}",
        "",
        "case \"${1:-job}\" in",
        "  trainer) run_trainer ;;",
        "  inference) run_inference ;;",
        "  job) run_job ;;",
        "  *) echo \"usage: $0 [job|trainer|inference]\" >&2; exit 2 ;;",
        "esac",
        "",
    ])


def _engines(inference: Sequence[str], count: int) -> list[str]:
    """`run_inference`'s body: the node's engine(s), their output appended to the node's log."""
    log = '2>&1 | tee -a "$LOGS/inference/node_$LOOPRL_NODE_RANK.log"'
    command = f'{shlex.join(inference)} --host "$SLURMD_NODENAME"'  # the name the orchestrator calls it by
    if count == 1:
        return [f'  {command} --port "$INFERENCE_PORT" {log}']
    return [
        "  {",
        '    IFS=, read -ra gpus <<< "${CUDA_VISIBLE_DEVICES:-}"',
        "    for ((i = 0; i < ENGINES_PER_NODE; i++)); do",
        f'      CUDA_VISIBLE_DEVICES="${{gpus[i]:-$i}}" {command} --port "$((INFERENCE_PORT + i))" 2>&1 '
        '| sed -u "s/^/[gpu $i] /" &',
        "    done",
        "    wait",
        f"  }} {log}",
    ]


def write_sbatch(script: str, output_dir: Path) -> Path:
    """Write the script to `{output_dir}/rl.sbatch` (the path the script calls itself by)."""
    path = Path(output_dir).resolve() / SBATCH_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    path.chmod(0o755)
    return path


def submit_sbatch(path: Path) -> str:
    """Submit the script with `sbatch --parsable`; the job id."""
    try:
        proc = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise UserError(f"sbatch is not installed here; the script is at {path}") from None
    if proc.returncode != 0:
        raise UserError(f"sbatch {path} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip().split(";")[0]
