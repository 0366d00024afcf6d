"""The continuous-batching scheduler on a tiny random model: batched results equal unbatched ones."""

import asyncio

import pytest
import torch

from looprl.inference.batch import DecodeBatch, model_forward, prefill
from looprl.inference.engine import Engine
from looprl.inference.token_sampling import SamplingParams
from looprl.inference.weight_update import WeightsError, load_update


@pytest.fixture
async def engine(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    engine = Engine(model, tokenizer, max_batch_size=8)
    engine.start()
    yield engine
    engine.stop()


def prompts(tokenizer, count):
    return [tokenizer(f"hello world {'two ' * i}plus", add_special_tokens=False)["input_ids"] for i in range(count)]


@torch.no_grad()
def teacher_forced(model, prompt, completion):
    logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)


async def staggered(engine, items, delay=0.01):
    """Submit requests a little apart, so later ones join a batch that is already decoding."""
    tasks = []
    for prompt, params, n in items:
        tasks.append(asyncio.create_task(engine.generate(prompt, params, n)))
        await asyncio.sleep(delay)
    return await asyncio.gather(*tasks)


@pytest.mark.parametrize("delay", [0.0, 0.01])
async def test_batched_logprobs_match_teacher_forcing(engine, delay):
    ps = prompts(engine.tokenizer, 6)
    items = [(p, SamplingParams(max_tokens=10 + 5 * i, seed=i), 1 + i % 2) for i, p in enumerate(ps)]
    results = await staggered(engine, items, delay)
    for prompt, completions in zip(ps, results):
        for c in completions:
            expected = teacher_forced(engine.model, prompt, c.token_ids)
            assert torch.allclose(torch.tensor(c.logprobs), expected, atol=1e-4)


def test_padded_prefill_and_decode_match_single_passes(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    ps = prompts(tokenizer, 3)
    batch, forward = DecodeBatch(), model_forward(model)
    new = prefill(forward, ps, [2, 1, 1], model.device)
    batch.add(new)
    rows = [ps[0], ps[0], ps[1], ps[2]]
    with torch.no_grad():
        for row, prompt in enumerate(rows):
            assert torch.allclose(new.logits[row], model(torch.tensor([prompt])).logits[0, -1], atol=1e-4)
        nxt = [5, 6, 7, 8]
        logits = batch.decode(forward, nxt, [len(p) for p in rows])
        for row, prompt in enumerate(rows):
            assert torch.allclose(logits[row], model(torch.tensor([prompt + [nxt[row]]])).logits[0, -1], atol=1e-4)
    batch.keep([3, 2])
    assert batch.size == 2 and batch.mask.shape[1] == len(ps[2]) + 1  # the longest left: no all-padding column


async def test_greedy_batched_equals_alone(engine):
    ps = prompts(engine.tokenizer, 5)
    greedy = SamplingParams(temperature=0, max_tokens=20)
    alone = [(await engine.generate(p, greedy))[0].token_ids for p in ps]
    together = await staggered(engine, [(p, greedy, 1) for p in ps], delay=0.002)
    assert [r[0].token_ids for r in together] == alone


async def test_seed_reproducible_and_n_choices_differ(engine):
    p = prompts(engine.tokenizer, 1)[0]
    params = SamplingParams(max_tokens=12, seed=5)
    first, second = await engine.generate(p, params, 3), await engine.generate(p, params, 3)
    assert [c.token_ids for c in first] == [c.token_ids for c in second]
    assert len({tuple(c.token_ids) for c in first}) > 1


async def test_length_stop_string_and_context_limit(engine):
    p = prompts(engine.tokenizer, 1)[0]
    [c] = await engine.generate(p, SamplingParams(temperature=0, max_tokens=7))
    assert (len(c.token_ids), c.finish_reason) == (7, "length")
    stop = c.text[3:5]
    [s] = await engine.generate(p, SamplingParams(temperature=0, max_tokens=7, stop=(stop,)))
    assert s.finish_reason == "stop" and s.text == c.text[: c.text.find(stop)]
    long_prompt = (p * 1000)[: engine.max_context - 3]
    [truncated] = await engine.generate(long_prompt, SamplingParams(max_tokens=50))
    assert (len(truncated.token_ids), truncated.finish_reason) == (3, "length")


async def test_cancelled_request_leaves_the_batch(engine):
    p = prompts(engine.tokenizer, 1)[0]
    task = asyncio.create_task(engine.generate(p, SamplingParams(max_tokens=200)))
    await asyncio.sleep(0.05)
    task.cancel()
    # greedy: an unseeded draw depends on how many steps the cancelled row took, and may pick EOS
    [c] = await engine.generate(p, SamplingParams(temperature=0, max_tokens=5))
    assert len(c.token_ids) == 5
    assert not any(row.request.params.max_tokens == 200 for row in engine._rows)


async def test_weight_update_waits_for_earlier_requests(engine, tmp_path):
    from safetensors.torch import save_file

    model = engine.model
    p = prompts(engine.tokenizer, 1)[0]
    scaled = {k: v * 1.5 for k, v in model.state_dict().items() if k.endswith(("norm.weight", "up_proj.weight"))}
    save_file(scaled, tmp_path / "model.safetensors")
    before = teacher_forced(model, p, [5, 6, 7])

    early = asyncio.create_task(engine.generate(p, SamplingParams(max_tokens=30, seed=1)))
    await asyncio.sleep(0.01)
    update = asyncio.create_task(engine.update_weights(load_update(tmp_path, model, version=7)))
    late = asyncio.create_task(engine.generate(p, SamplingParams(max_tokens=5, seed=1)))
    [early_out], _, [late_out] = await asyncio.gather(early, update, late)
    assert (engine.weights_version, engine.weights_path) == (7, str(tmp_path))
    after = teacher_forced(model, p, [5, 6, 7])
    assert not torch.allclose(before, after)
    assert torch.allclose(torch.tensor(late_out.logprobs), teacher_forced(model, p, late_out.token_ids), atol=1e-4)
    # the early request finished before the swap: its logprobs are the old weights'
    assert not torch.allclose(torch.tensor(early_out.logprobs), teacher_forced(model, p, early_out.token_ids),
                              atol=1e-4)
    assert set(early_out.versions) == {0} and set(late_out.versions) == {7}


async def test_in_flight_update_swaps_between_decoding_steps(engine, tmp_path):
    """An in-flight update lands while a request decodes: the row continues, the tokens before the swap keep
    version 0 (and are the old weights' samples), the ones after it carry the new version."""
    import copy

    from safetensors.torch import save_file

    model = engine.model
    old = copy.deepcopy(model)
    p = prompts(engine.tokenizer, 1)[0]
    save_file({k: v * 1.5 for k, v in model.state_dict().items() if k.endswith(("norm.weight", "up_proj.weight"))},
              tmp_path / "model.safetensors")
    running = asyncio.create_task(engine.generate(p, SamplingParams(max_tokens=400, seed=3)))
    while not engine._rows or len(engine._rows[0].completion.token_ids) < 3:
        await asyncio.sleep(0.001)
    await engine.update_weights(load_update(tmp_path, model, version=7, in_flight=True))
    swapped_at = next((len(r.completion.token_ids) for r in engine._rows), None)
    [out] = await running
    assert swapped_at is not None, "the request finished before the update was applied"
    assert 3 <= out.versions.index(7) <= swapped_at  # the row was still decoding when the weights changed
    k = out.versions.index(7)
    assert out.versions == [0] * k + [7] * (len(out.token_ids) - k)
    assert torch.allclose(torch.tensor(out.logprobs[:k]), teacher_forced(old, p, out.token_ids[:k]), atol=1e-4)
    assert engine.weights_version == 7


async def test_a_failed_weight_copy_serves_the_new_weights_unpacked(engine, tmp_path, monkeypatch):
    """If copying the new weights into the fast forward fails (out of memory), the update is reported failed
    and the engine serves the model's own forward, on the weights now in the model, never stale copies."""
    from safetensors.torch import save_file

    model = engine.model
    p = prompts(engine.tokenizer, 1)[0]
    save_file({k: v * 1.5 for k, v in model.state_dict().items() if k.endswith("up_proj.weight")},
              tmp_path / "model.safetensors")

    def out_of_memory() -> None:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(engine._forward, "refresh", out_of_memory)
    with pytest.raises(RuntimeError, match="out of memory"):
        await engine.update_weights(load_update(tmp_path, model, version=3))
    [out] = await engine.generate(p, SamplingParams(max_tokens=5, seed=1))
    assert torch.allclose(torch.tensor(out.logprobs), teacher_forced(model, p, out.token_ids), atol=1e-4)


def test_load_update_rejects_bad_directories(model_and_tokenizer, tmp_path):
    from safetensors.torch import save_file

    model, _ = model_and_tokenizer
    with pytest.raises(WeightsError, match="does not exist"):
        load_update(tmp_path / "missing", model)
    with pytest.raises(WeightsError, match=r"no \*.safetensors"):
        load_update(tmp_path, model)
    save_file({"nope.weight": torch.zeros(2)}, tmp_path / "a.safetensors")
    with pytest.raises(WeightsError, match="not in the model"):
        load_update(tmp_path, model)
    (tmp_path / "a.safetensors").unlink()
    save_file({"model.norm.weight": torch.zeros(3)}, tmp_path / "b.safetensors")
    with pytest.raises(WeightsError, match="shape mismatch"):
        load_update(tmp_path, model)


async def test_siblings_with_one_prompt_are_prefilled_once(model_and_tokenizer, monkeypatch):
    """Separate requests for the same prompt (a GRPO group) share one prefill row; each still samples
    its own completion, with logprobs that match teacher forcing."""
    import looprl.inference.engine as engine_module

    prefilled: list[int] = []
    real_prefill = engine_module.prefill

    def counting_prefill(forward, prompts, copies, device):
        prefilled.append(len(prompts))
        return real_prefill(forward, prompts, copies, device)

    monkeypatch.setattr(engine_module, "prefill", counting_prefill)
    model, tokenizer = model_and_tokenizer
    engine = Engine(model, tokenizer, max_batch_size=8)
    a, b = prompts(tokenizer, 2)
    # queued before the scheduler starts, so all six are admitted together
    tasks = [asyncio.ensure_future(engine.generate(p, SamplingParams(max_tokens=8, seed=i), 1))
             for i, p in enumerate([a, b, a, a, b, a])]
    await asyncio.sleep(0)
    engine.start()
    try:
        results = await asyncio.gather(*tasks)
    finally:
        engine.stop()
    assert prefilled == [2]
    assert len({tuple(r[0].token_ids) for r in results}) > 2
    for prompt, [c] in zip([a, b, a, a, b, a], results):
        assert torch.allclose(torch.tensor(c.logprobs), teacher_forced(model, prompt, c.token_ids), atol=1e-4)
