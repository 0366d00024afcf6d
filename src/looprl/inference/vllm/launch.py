"""vLLM's OpenAI server as looprl's inference engine: `VllmProcess`, an `EngineProcess` running
`python -m vllm.entrypoints.openai.api_server` instead of `looprl inference`.

    engine = VllmProcess(model_dir, served_model_name="smollm2-135m-instruct", log_path=...,
                         python=vllm_python(None), dtype="bfloat16", lora_rank=16, vllm_args=["--max-num-seqs", "64"])
    with engine:  # waits for /health, like the embedded engine
        ...

The server is started with what looprl relies on: the served model name, the weights' `dtype`
(`inference.dtype`: bfloat16 on GPUs, where vLLM's LoRA kernels accept nothing wider and
FlashAttention needs it; float32 on the CPU), the Hermes tool-call parser
(SmolLM2's, Qwen's and the embedded engine's `<tool_call>` format) with, when the model's own chat
template has no tool support, `template.hermes_template` (the prompts the embedded engine renders),
runtime LoRA when the trainer trains adapters, its GPUs (`gpus`, default: those in
`CUDA_VISIBLE_DEVICES`) split into replicas of `tensor_parallel_size` GPUs each (vLLM's
`--tensor-parallel-size` and `--data-parallel-size`: one server, whose engine spreads the requests
over the replicas and runs each weight update and adapter load on all of them; this entry point runs
one API server process whatever the data parallelism, so `routes` keeps one state, where `vllm
serve` would start one API server per replica), and looprl's own
pieces: `routes` as HTTP middleware (`/update_weights`, `/health`) and `worker.WeightLoader` as the
worker extension. Requests get token ids and logprobs by asking (`return_token_ids`, `logprobs`), as
the gateway does. `vllm_args` come last, so they override any of these.

The run secret reaches vLLM as its `--api-key` through the environment (`VLLM_API_KEY`, which vLLM
reads; never on the command line, where `ps` shows it), and the directories weights may come from as
`LOOPRL_WEIGHTS_DIRS`, both for `routes`.

The interpreter is its own (vLLM pins its own torch and transformers): `vllm_python()` picks it.
The child sees looprl's package through a one-entry `PYTHONPATH` (a link to the package), never
looprl's own site-packages. It runs in its own process group, so stopping it also stops vLLM's
engine-core and worker processes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import looprl
from looprl.errors import UserError
from looprl.inference.process import EngineProcess
from looprl.inference.vllm.routes import API_KEY_ENV, WEIGHTS_DIRS_ENV
from looprl.inference.vllm.template import tool_template_for

VENV = ".venv-vllm"
"""The virtual environment `make test` builds for vLLM, at the repository root."""
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The `--max-lora-rank` values vLLM accepts."""
CPU_KV_CACHE_GIB = "1"
"""KV cache of the CPU build (`VLLM_CPU_KVCACHE_SPACE`) unless set: its default reserves most of the RAM."""
AOT_COMPILE_ENV = "VLLM_USE_AOT_COMPILE"
"""Set to 0 on the CPU unless the user set it: no AOT compilation there. The CPU build (0.32, torch 2.13) saves
AOT artifacts it then fails to load ("'function' object has no attribute 'finalize_loading'"), and every start
compiled the model again (3-5 minutes on two cores); without AOT the first start on a machine compiles and
the later ones find the kernels in torch's inductor cache (docs/inference.md)."""


def vllm_python(configured: str | None = None) -> str:
    """The interpreter that runs vLLM: `configured`, else this one if it imports vllm, else `.venv-vllm`'s
    (in the working directory or the repository looprl runs from)."""
    if configured:
        return configured
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    for root in (Path.cwd(), Path(looprl.__file__).resolve().parents[2]):
        candidate = root / VENV / "bin" / "python"
        if candidate.is_file():
            return str(candidate)
    raise UserError("inference.backend = 'vllm' needs vLLM: `pip install vllm` (GPU) or `make vllm` (a CPU build in "
                    f"{VENV}/), or point inference.vllm_python at an interpreter that has it")


def max_lora_rank(rank: int) -> int:
    """The smallest `--max-lora-rank` vLLM accepts that holds adapters of `rank`."""
    return next((r for r in LORA_RANKS if r >= rank), rank)


def attention_heads(model_dir: Path) -> tuple[int, int] | None:
    """`(num_attention_heads, num_key_value_heads)` of an HF model directory's config (a multimodal model's
    text config), if known; a config without KV heads has one per query head."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    text = config if "num_attention_heads" in config else config.get("text_config") or {}
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads") or heads
    return (heads, kv_heads) if isinstance(heads, int) and isinstance(kv_heads, int) else None


class VllmProcess(EngineProcess):
    engine_name = "vLLM server"
    own_process_group = True

    def __init__(self, model: str, *, python: str, served_model_name: str, log_path: Path | None = None,
                 port: int | None = None, host: str = "127.0.0.1", startup_timeout: float = 900.0,
                 tool_call_parser: str | None = "hermes", lora_rank: int | None = None, dtype: str = "bfloat16",
                 gpus: int | None = None, tensor_parallel_size: int = 1, vllm_args: Sequence[str] = (),
                 secret: str | None = None, weights_dirs: Sequence[Path] = ()) -> None:
        super().__init__(model, log_path=log_path, port=port, host=host, startup_timeout=startup_timeout,
                         extra_args=vllm_args, served_model_name=served_model_name, secret=secret,
                         weights_dirs=weights_dirs)
        self.python, self.tool_call_parser, self.lora_rank, self.dtype = python, tool_call_parser, lora_rank, dtype
        self.gpus, self.tensor_parallel_size = gpus, tensor_parallel_size
        self._dir: Path | None = None

    def command(self) -> list[str]:
        parallel = self.parallel_args()  # a bad split fails before anything is written
        command = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
                   "--served-model-name", self.model_name, "--host", self.host, "--port", str(self.port),
                   "--dtype", self.dtype, "--middleware", "looprl.inference.vllm.routes.looprl_routes",
                   "--worker-extension-cls", "looprl.inference.vllm.worker.WeightLoader",
                   "--disable-uvicorn-access-log"]
        if self.tool_call_parser:
            command += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_call_parser]
        template = tool_template_for(Path(self.model)) if self.tool_call_parser == "hermes" else None
        if template is not None:
            path = self._workdir() / "chat_template.jinja"
            path.write_text(template)
            command += ["--chat-template", str(path)]
        if self.lora_rank:
            command += ["--enable-lora", "--max-lora-rank", str(max_lora_rank(self.lora_rank)), "--max-loras", "2"]
        return command + parallel + self.extra_args

    def gpu_count(self) -> int:
        """The engine's GPUs: `gpus`, else the deployment's `inference_gpus` (`launch.placement` sets
        `CUDA_VISIBLE_DEVICES`); 0 on the CPU."""
        if self.gpus is not None:
            return self.gpus
        return len([g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()])

    def parallel_args(self) -> list[str]:
        """`--tensor-parallel-size` and `--data-parallel-size` over the engine's GPUs (none on the CPU)."""
        gpus, tp = self.gpu_count(), self.tensor_parallel_size
        if gpus == 0 and tp == 1:
            return []
        if gpus % tp:
            raise UserError(f"inference.tensor_parallel_size = {tp} must divide the engine's {gpus} GPU(s)")
        heads = attention_heads(Path(self.model))
        if heads and heads[0] % tp:
            raise UserError(f"inference.tensor_parallel_size = {tp} must divide the model's {heads[0]} attention "
                            f"heads (vLLM splits them across the GPUs of a replica)")
        if heads and heads[1] % tp and tp % heads[1]:  # vLLM splits the KV heads, or replicates each on tp/kv GPUs
            raise UserError(f"inference.tensor_parallel_size = {tp} must divide the model's {heads[1]} KV heads or "
                            f"be a multiple of them (vLLM splits them across a replica's GPUs, or copies each)")
        args = ["--tensor-parallel-size", str(tp)] if tp > 1 else []
        return args + (["--data-parallel-size", str(gpus // tp)] if gpus > tp else [])

    def environment(self) -> dict[str, str]:
        env = super().environment()
        package = self._workdir() / "path" / "looprl"
        if not package.exists():
            package.parent.mkdir()
            package.symlink_to(Path(looprl.__file__).resolve().parent)
        env["PYTHONPATH"] = str(package.parent)
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_CACHE_GIB)
        if self.gpu_count() == 0:
            env.setdefault(AOT_COMPILE_ENV, "0")
        if self.secret:  # vLLM's --api-key, which then guards /v1; `routes` checks it on every other route
            env[API_KEY_ENV] = self.secret
        else:  # a key in the user's environment would make vLLM refuse clients that were given none
            env.pop(API_KEY_ENV, None)
        env[WEIGHTS_DIRS_ENV] = os.pathsep.join(map(str, self.weights_dirs))
        return env

    def stop(self) -> None:
        super().stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _workdir(self) -> Path:
        """A temporary directory for the child's files (the package link, a chat template), removed on stop."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="looprl-vllm-"))
        return self._dir
