"""Per-row sampling: greedy, seeds, top_p, and the two logprobs modes."""

import torch

from looprl.inference.token_sampling import SamplingParams, sample


def logits(rows: int = 3, vocab: int = 50) -> torch.Tensor:
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(0)) * 3


def test_greedy_takes_argmax_and_reports_raw_logprobs():
    x = logits()
    out = sample(x, [SamplingParams(temperature=0)] * 3, [None] * 3)
    assert out.tokens == x.argmax(-1).tolist()
    expected = torch.log_softmax(x, -1).gather(1, x.argmax(-1)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(out.logprobs), expected)


def test_raw_and_processed_logprobs():
    x = logits(1)
    params = [SamplingParams(temperature=0.5, seed=3)]
    raw = sample(x, params, [torch.Generator().manual_seed(3)], "raw_logprobs")
    processed = sample(x, params, [torch.Generator().manual_seed(3)], "processed_logprobs")
    token = raw.tokens[0]
    assert processed.tokens == [token]
    assert abs(raw.logprobs[0] - torch.log_softmax(x, -1)[0, token].item()) < 1e-5
    assert abs(processed.logprobs[0] - torch.log_softmax(x / 0.5, -1)[0, token].item()) < 1e-5


def test_seeded_rows_are_reproducible_whatever_their_neighbours():
    x = logits(3)
    params = [SamplingParams(), SamplingParams(seed=7), SamplingParams()]
    first = [sample(x, params, [None, torch.Generator().manual_seed(7), None]).tokens[1] for _ in range(5)]
    alone = sample(x[1:2], params[1:2], [torch.Generator().manual_seed(7)]).tokens[0]
    assert first == [alone] * 5


def test_top_p_keeps_only_the_nucleus():
    x = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    params = [SamplingParams(top_p=0.7, top_logprobs=4)]
    seen = {sample(x, params, [None], "processed_logprobs").tokens[0] for _ in range(200)}
    assert seen == {0, 1}
    top = sample(x, params, [None], "processed_logprobs").top[0]
    assert [t for t, _ in top][:2] == [0, 1]
    assert [v for _, v in top][2:] == [-9999.0, -9999.0]  # -inf, made JSON-safe


def test_top_logprobs_per_row():
    x = logits(2)
    out = sample(x, [SamplingParams(temperature=0, top_logprobs=3), SamplingParams(temperature=0)], [None, None])
    assert len(out.top[0]) == 3 and out.top[1] == []
    assert out.top[0][0][0] == out.tokens[0]


def test_draws_follow_the_distribution():
    """Sampled frequencies match the softmax (seeded and shared rows), and a zero-probability token is never drawn."""
    probs = torch.tensor([0.5, 0.25, 0.125, 0.125, 0.0])
    x = torch.log(probs)[None].repeat(2, 1)
    params = [SamplingParams(), SamplingParams(seed=1)]
    generator = torch.Generator().manual_seed(1)
    counts = torch.zeros(2, 5)
    torch.manual_seed(0)
    for _ in range(4000):
        for row, token in enumerate(sample(x, params, [None, generator]).tokens):
            counts[row, token] += 1
    assert counts[:, 4].sum() == 0
    assert torch.allclose(counts / 4000, probs.expand(2, 5), atol=0.03)
