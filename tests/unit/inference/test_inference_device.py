"""The embedded engine's device: `--device auto` picks CUDA only when torch sees it, the launcher's
memory fraction reaches `set_per_process_memory_fraction` (and vLLM's flag), and the engine creates
every tensor on the model's device, never on a default one."""

import asyncio

import pytest
import torch

from looprl import cli
from looprl.config import InferenceConfig
from looprl.config.deployment import MEMORY_FRACTION_ENV
from looprl.device import limit_memory
from looprl.device import resolve as engine_device
from looprl.errors import UserError
from looprl.inference import engine as engine_module
from looprl.inference.backends import engine_process
from looprl.inference.batch import DecodeBatch, TransformersForward, prefill
from looprl.inference.engine import Engine
from looprl.inference.lean_decoder import lean_decoder
from looprl.inference.token_sampling import SamplingParams, sample


def test_auto_is_cuda_only_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert engine_device("auto") == torch.device("cpu")
    with pytest.raises(UserError, match="no CUDA device"):
        engine_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert engine_device("auto") == torch.device("cuda", 0) == engine_device("cuda")
    assert engine_device("cpu") == torch.device("cpu")


def test_memory_fraction_only_caps_a_gpu(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda *a: calls.append(a))
    limit_memory(torch.device("cpu"), 0.4)
    limit_memory(torch.device("cuda", 0), None)
    assert not calls
    with pytest.raises(UserError, match="gpu-memory-fraction"):
        limit_memory(torch.device("cuda", 0), 1.5)


class _Loaded(Exception):
    """Stops `looprl inference` where it would load the model."""


def test_the_launchers_fraction_reaches_the_engine_process(tiny_model_dir, monkeypatch):
    from loguru import logger as plain_logger

    from looprl import model_loading
    from looprl.utils import logger

    calls = []
    monkeypatch.setenv(MEMORY_FRACTION_ENV, "0.4")  # what the launcher sets when engine and trainer share the GPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda *a: calls.append(("cap", *a)))
    monkeypatch.setattr(logger, "setup_logger", lambda *a, **k: plain_logger)  # no global reconfiguring

    def load(path, dtype, device):
        calls.append(("load", dtype, device))
        raise _Loaded

    monkeypatch.setattr(model_loading, "load_model_and_tokenizer", load)
    with pytest.raises(_Loaded):
        cli.main(["inference", "--model", str(tiny_model_dir)])
    cuda = torch.device("cuda", 0)
    # capped before anything is allocated; `--dtype auto` is bfloat16 on the GPU
    assert calls == [("cap", 0.4, cuda), ("load", "bfloat16", cuda)]


def test_vllm_gets_the_fraction_unless_the_user_sets_it(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(MEMORY_FRACTION_ENV, "0.4")
    cases = (([], "0.4"), (["--gpu-memory-utilization", "0.7"], "0.7"), (["--gpu-memory-utilization=0.7"], None))
    for user, expected in cases:
        cfg = InferenceConfig(backend="vllm", vllm_python="python", vllm_args=user)
        engine = engine_process(cfg, str(tiny_model_dir))
        command = engine.command()
        flags = [a for a in command if a.startswith("--gpu-memory-utilization")]
        assert len(flags) == 1
        assert expected is None or command[command.index("--gpu-memory-utilization") + 1] == expected
        engine.stop()


@pytest.mark.parametrize("kind", ["lean", "transformers"])
def test_tensors_follow_the_model_not_the_default_device(model_and_tokenizer, monkeypatch, kind):
    """With "meta" as the default device, a tensor made without `device=` is a meta tensor that the CPU
    model cannot use: the engine works only if it creates each one on the model's device, as it must
    for a model on a GPU. Both forward passes are checked: the lean one and the model's own."""
    model, tokenizer = model_and_tokenizer
    real_forward = lean_decoder(model) if kind == "lean" else TransformersForward(model)
    assert real_forward is not None

    def forward(*args):  # a meta input would pass through a CPU model's embedding unnoticed
        assert all(t.device == model.device for t in args if isinstance(t, torch.Tensor))
        return real_forward(*args)

    forward.refresh = real_forward.refresh  # type: ignore[attr-defined]
    monkeypatch.setattr(engine_module, "model_forward", lambda model: forward)
    with torch.device("meta"):
        batch = DecodeBatch()
        batch.add(prefill(forward, [[5, 6, 7], [8, 9]], [2, 1], model.device))
        logits = batch.decode(forward, [1, 2, 3], [3, 3, 2])
        batch.keep([2, 0])
        params = [SamplingParams(temperature=0), SamplingParams(temperature=0.7, top_p=0.9, top_logprobs=2)]
        sampled = sample(logits[:2], params, [None, torch.Generator(model.device).manual_seed(1)])
    assert logits.device == batch.mask.device == model.device and len(sampled.tokens) == 2

    real_loop = Engine._loop

    def loop_with_meta_default(self: Engine) -> None:  # the default device is per thread: set it in the engine's
        with torch.device("meta"):
            real_loop(self)

    monkeypatch.setattr(Engine, "_loop", loop_with_meta_default)

    async def generate() -> list:
        engine = Engine(model, tokenizer, max_batch_size=4)
        with torch.device("meta"):
            engine.start()
        try:
            nucleus = SamplingParams(max_tokens=4, temperature=0.7, top_p=0.9)
            return await asyncio.gather(engine.generate([5, 6, 7], SamplingParams(max_tokens=5, seed=1), n=2),
                                        engine.generate([5, 6], nucleus))
        finally:
            engine.stop()

    results = asyncio.run(generate())
    assert [len(c.token_ids) for group in results for c in group] == [5, 5, 4]
