"""The vLLM backend without vLLM: the command line looprl starts it with, its interpreter, the engine
factory, the orchestrator following the model name `/update_weights` answers (LoRA adapters), and the
worker's check that a weights directory holds each fused layer it touches whole."""

import json
import re
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

from looprl.config import InferenceConfig, engine_dtype
from looprl.errors import UserError
from looprl.inference import backends
from looprl.inference.backends import engine_process
from looprl.inference.process import EngineProcess
from looprl.inference.vllm import launch
from looprl.inference.vllm.launch import VllmProcess, max_lora_rank, vllm_python
from looprl.inference.vllm.template import model_chat_template
from looprl.inference.vllm.worker import fused_parts_missing
from looprl.orchestrator.weight_sync import WeightSync


def test_the_embedded_engine_stays_the_default(tiny_model_dir):
    engine = engine_process(InferenceConfig(), str(tiny_model_dir))
    assert type(engine) is EngineProcess and engine.command()[1:4] == ["-m", "looprl.cli", "inference"]


def test_vllm_command_line(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # the deployment's inference_gpus, set by the launcher
    cfg = InferenceConfig(backend="vllm", vllm_python="/opt/vllm/bin/python", max_batch_size=8,
                          vllm_args=["--dtype", "bfloat16"])
    engine = engine_process(cfg, str(tiny_model_dir), lora_rank=12, port=8123)
    assert isinstance(engine, VllmProcess)
    command = engine.command()
    assert command[:3] == ["/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    flags = " ".join(command)
    for expected in (f"--model {tiny_model_dir}", f"--served-model-name {tiny_model_dir}", "--port 8123",
                     "--middleware looprl.inference.vllm.routes.looprl_routes",
                     "--worker-extension-cls looprl.inference.vllm.worker.WeightLoader",
                     "--enable-auto-tool-choice --tool-call-parser hermes", "--enable-lora --max-lora-rank 16",
                     "--data-parallel-size 2", "--max-num-seqs 8"):
        assert expected in flags
    assert command[-2:] == ["--dtype", "bfloat16"]  # the user's flags come last and win
    env = engine.environment()
    try:
        template = Path(command[command.index("--chat-template") + 1]).read_text()  # the tiny model's has no tools
        assert "<tool_call>" in template and template.endswith(model_chat_template(tiny_model_dir))
        assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
        [link] = Path(env["PYTHONPATH"]).iterdir()  # looprl's package, nothing else
        assert link.name == "looprl" and (link / "inference" / "vllm" / "worker.py").is_file()
    finally:
        engine.stop()


def test_no_lora_no_tool_parser(tiny_model_dir):
    cfg = InferenceConfig(backend="vllm", vllm_python="python", tool_call_parser=None)
    flags = engine_process(cfg, str(tiny_model_dir)).command()
    assert "--enable-lora" not in flags and "--tool-call-parser" not in flags


@pytest.mark.parametrize("gpus,users", [("", None), ("", "1"), ("0", None)])
def test_on_the_cpu_vllm_compiles_into_a_cache_it_can_load(tiny_model_dir, monkeypatch, gpus, users):
    """The CPU build's AOT compile artifacts fail to load, so there vLLM compiles without AOT, into torch's
    inductor cache (unless the user chose); on GPUs vLLM's default stands."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
    if users is None:
        monkeypatch.delenv(launch.AOT_COMPILE_ENV, raising=False)
    else:
        monkeypatch.setenv(launch.AOT_COMPILE_ENV, users)
    engine = engine_process(InferenceConfig(backend="vllm", vllm_python="python"), str(tiny_model_dir))
    try:
        expected = users or ("0" if not gpus else None)
        assert engine.environment().get(launch.AOT_COMPILE_ENV) == expected
    finally:
        engine.stop()


def test_vllm_python_resolution(tmp_path, monkeypatch):
    assert vllm_python("/given/python") == "/given/python"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object())
    assert vllm_python() == sys.executable
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(launch, "VENV", "no-such-venv")
    with pytest.raises(UserError, match="needs vLLM"):
        vllm_python()
    (tmp_path / "no-such-venv" / "bin").mkdir(parents=True)
    (tmp_path / "no-such-venv" / "bin" / "python").touch()
    assert vllm_python() == str(tmp_path / "no-such-venv" / "bin" / "python")


def test_max_lora_rank_rounds_up_to_what_vllm_accepts():
    assert [max_lora_rank(r) for r in (1, 8, 9, 16, 17, 64)] == [1, 8, 16, 16, 32, 64]


async def test_weight_sync_follows_the_model_the_engine_names(tmp_path, monkeypatch):
    names = []
    sync = WeightSync("http://engine", tmp_path, on_model=names.append)

    async def post(self, url, json):
        return httpx.Response(200, json={"version": json["version"], "path": json["path"], "model": "m-step-3"})

    monkeypatch.setattr(httpx.AsyncClient, "post", post)
    await sync.load(tmp_path, 3)
    assert sync.version == 3 and names == ["m-step-3"]


def test_the_tool_template_renders_the_embedded_engines_prompts(tiny_model_dir):
    from transformers import AutoTokenizer

    from looprl.inference import protocol as p
    from looprl.inference.chat import render_prompt
    from looprl.inference.vllm.template import tool_template_for

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}]
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}
    turns = [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
             {"role": "tool", "tool_call_id": "c1", "content": "2"},
             {"role": "tool", "tool_call_id": "c1", "content": "ok"},
             {"role": "assistant", "content": "2"}, {"role": "user", "content": "and 2+2?"}]
    for system in ([], [{"role": "system", "content": "Be brief."}]):
        for schemas in (tools, None):
            messages = system + turns
            text = tokenizer.apply_chat_template(messages, tools=schemas,
                                                 chat_template=tool_template_for(tiny_model_dir),
                                                 tokenize=False, add_generation_prompt=True)
            expected = render_prompt(tokenizer, [p.ChatMessage(**m) for m in messages],
                                     [p.Tool(**t) for t in schemas] if schemas else None)
            assert tokenizer(text, add_special_tokens=False)["input_ids"] == expected


@pytest.mark.parametrize("cuda,dtype", [(True, "bfloat16"), (False, "float32")])
def test_vllm_starts_in_the_dtype_of_its_hardware(tiny_model_dir, monkeypatch, cuda, dtype):
    """`inference.dtype = "auto"`: bfloat16 on a GPU (vLLM's LoRA kernels take nothing wider), float32 on the CPU."""
    monkeypatch.setattr(backends, "_cuda_available", lambda: cuda)
    command = engine_process(InferenceConfig(backend="vllm", vllm_python="py"), str(tiny_model_dir)).command()
    assert command[command.index("--dtype") + 1] == dtype
    set_dtype = engine_process(InferenceConfig(backend="vllm", vllm_python="py", dtype="float16"), str(tiny_model_dir))
    assert set_dtype.command()[set_dtype.command().index("--dtype") + 1] == "float16"


def test_the_embedded_engine_gets_the_configured_dtype(tiny_model_dir):
    command = engine_process(InferenceConfig(dtype="bfloat16"), str(tiny_model_dir)).command()
    assert command[command.index("--dtype") + 1] == "bfloat16"
    assert engine_dtype("auto", gpu=True) == "bfloat16" and engine_dtype("auto", gpu=False) == "float32"


def test_the_vllm_extra_pins_the_version_the_cpu_build_tests():
    """routes.py and worker.py use vLLM internals that move between releases: the GPU install must get the
    release `make vllm` (the CPU build the tests run) installs."""
    root = Path(__file__).resolve().parents[3]
    pins = re.findall(r"vllm-cpu==([\d.]+)", (root / "Makefile").read_text())
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm"]
    assert pins and extra == [f"vllm=={pins[0]}"]


@pytest.mark.parametrize("gpus,tp,flags", [(0, 1, []), (1, 1, []), (8, 1, ["--data-parallel-size", "8"]),
                                           (8, 2, ["--tensor-parallel-size", "2", "--data-parallel-size", "4"]),
                                           (4, 4, ["--tensor-parallel-size", "4"])])
def test_vllm_splits_its_gpus_into_tensor_parallel_replicas(tiny_model_dir, gpus, tp, flags):
    cfg = InferenceConfig(backend="vllm", vllm_python="py", tensor_parallel_size=tp)
    assert engine_process(cfg, str(tiny_model_dir), gpus=gpus).parallel_args() == flags


def test_a_tensor_parallel_size_that_does_not_divide_the_gpus_is_one_line(tiny_model_dir):
    cfg = InferenceConfig(backend="vllm", vllm_python="py", tensor_parallel_size=3)
    with pytest.raises(UserError, match="must divide the engine's 8 GPU"):
        engine_process(cfg, str(tiny_model_dir), gpus=8).command()


@pytest.mark.parametrize("tp,allowed", [(2, True), (4, True), (7, False), (14, False), (28, True)])
def test_the_tensor_parallel_size_must_split_the_kv_heads_too(tmp_path, tp, allowed):
    """A GQA model (Qwen2.5-7B's 28 query heads over 4 KV heads): vLLM gives each GPU of a replica
    `kv_heads / tp` KV heads, or one KV head replicated `tp / kv_heads` times, so a size that divides the
    query heads but is neither a divisor nor a multiple of the KV heads (7, 14) fails inside vLLM; it is
    refused up front, naming both counts."""
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 28, "num_key_value_heads": 4}))
    cfg = InferenceConfig(backend="vllm", vllm_python="py", tensor_parallel_size=tp)
    engine = engine_process(cfg, str(tmp_path), gpus=28)
    if allowed:
        assert engine.parallel_args()[:2] == ["--tensor-parallel-size", str(tp)]
        return
    with pytest.raises(UserError, match=f"tensor_parallel_size = {tp} must divide the model's 4 KV heads or be "
                                        "a multiple of them") as error:
        engine.parallel_args()
    assert "\n" not in str(error.value)


def test_kv_heads_come_from_a_multimodal_models_text_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"num_attention_heads": 16,
                                                                      "num_key_value_heads": 8}}))
    assert launch.attention_heads(tmp_path) == (16, 8)
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 9}))  # no GQA: KV heads = heads
    assert launch.attention_heads(tmp_path) == (9, 9)


def test_a_tensor_parallel_size_that_does_not_divide_the_attention_heads_is_one_line(tiny_model_dir):
    """vLLM splits the heads across a replica's GPUs: SmolLM2-135M's 9 heads cannot go on 2 GPUs. Said before
    vLLM starts, in one line, instead of vLLM's assertion minutes later."""
    heads = json.loads((tiny_model_dir / "config.json").read_text())["num_attention_heads"]
    assert heads == 4
    cfg = InferenceConfig(backend="vllm", vllm_python="py", tensor_parallel_size=8)
    with pytest.raises(UserError, match="must divide the model's 4 attention heads") as error:
        engine_process(cfg, str(tiny_model_dir), gpus=8).command()
    assert "\n" not in str(error.value)
    assert "--tensor-parallel-size" in engine_process(cfg.model_copy(update={"tensor_parallel_size": 4}),
                                                      str(tiny_model_dir), gpus=8).parallel_args()


def test_a_weights_directory_must_hold_a_fused_layer_whole():
    """vLLM fills the parts of a fused layer it is not given with uninitialised memory: such a directory is refused."""
    fused = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
    mlp = "model.layers.3.mlp"
    assert fused_parts_missing([f"{mlp}.up_proj.weight", "model.norm.weight"], fused) == [f"{mlp}.gate_proj.weight"]
    assert fused_parts_missing([f"{mlp}.gate_proj.weight", f"{mlp}.up_proj.weight", "lm_head.weight"], fused) == []
    attention = "model.layers.0.self_attn"
    assert fused_parts_missing([f"{attention}.q_proj.bias"], fused) == [f"{attention}.k_proj.bias",
                                                                       f"{attention}.v_proj.bias"]
    assert fused_parts_missing(["up_proj.weight"], fused) == ["gate_proj.weight"]
