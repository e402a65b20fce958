"""Sampled local generation is reproducible per request: a request's text depends on its own seed and
sample_index, never on which other requests share its batch (issue 20, paired design)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("torch")

from mascot_eval.backends.base import GenerationParams  # noqa: E402
from mascot_eval.backends.client import ClientSettings, ModelClient  # noqa: E402


def test_gumbel_rows_sample_the_filtered_distribution():
    """The per-row sampler (Gumbel-max over the filtered scores, one generator per row) draws from the
    same distribution as torch.multinomial on the softmax, and a row's draws depend on its seed only."""
    import torch

    from mascot_eval.backends.local import _row_decoding, _row_sampler

    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    n = 4000
    scores = torch.log(probs).repeat(n, 1)
    filtered = _row_decoding([(1.0, 0.9)] * n)[0](None, scores)  # top-p 0.9 drops the 0.05 token
    picks = _row_sampler([(11, i) for i in range(n)], [True] * n)(None, filtered).argmax(-1)
    freq = torch.bincount(picks, minlength=4).float() / n
    want = torch.tensor([0.5, 0.3, 0.15, 0.0]) / 0.95
    ref = torch.multinomial(filtered.softmax(-1), 1, generator=torch.Generator().manual_seed(0)).squeeze(1)
    ref_freq = torch.bincount(ref, minlength=4).float() / n
    assert freq[3] == 0 and ref_freq[3] == 0
    assert torch.allclose(freq, want, atol=0.03) and torch.allclose(freq, ref_freq, atol=0.04)
    # row 5 alone gets the same draw as row 5 among 4000 rows; greedy rows get no noise
    alone = _row_sampler([(11, 5)], [True])(None, filtered[5:6]).argmax(-1)
    assert int(alone) == int(picks[5])
    greedy = _row_sampler([(11, 0)], [False])(None, filtered[:1])
    assert torch.equal(greedy, filtered[:1])


@pytest.mark.slow
@pytest.mark.torch
def test_sampled_text_does_not_depend_on_batch_mates():
    client = ModelClient("embedded", ClientSettings(use_cache=False, max_connections=8))
    engine = client.backend.engine()
    msg = [{"role": "user", "content": "Tell me about your favourite place to walk."}]
    mine = GenerationParams(max_tokens=16, temperature=0.9, top_p=0.95, seed=1234, sample_index=0)
    others = [
        (
            [{"role": "user", "content": "Write a short line about the rain, please, with some detail."}],
            GenerationParams(max_tokens=12, temperature=1.1, top_p=1.0, seed=99, sample_index=i),
        )
        for i in range(3)
    ] + [([{"role": "user", "content": "Hi"}], GenerationParams(max_tokens=8))]

    alone = asyncio.run(client.chat(msg, mine))
    n_before = len(engine.batches)

    async def together():
        return await asyncio.gather(
            *(client.chat(m, p) for m, p in others[:2]), client.chat(msg, mine), *(client.chat(m, p) for m, p in others[2:])
        )

    mixed = asyncio.run(together())
    assert engine.batches[n_before:] == [5]  # really one batch with four other rows
    assert mixed[2].text == alone.text and alone.text.strip()
    again = asyncio.run(client.chat(msg, mine))
    assert again.text == alone.text  # reproducible
    other_seed = asyncio.run(
        client.chat(msg, GenerationParams(max_tokens=16, temperature=0.9, top_p=0.95, seed=1234, sample_index=1))
    )
    assert other_seed.text != alone.text  # another sample index is another sample
