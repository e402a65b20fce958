"""The embedded model batches concurrent callers: left padding, per-request max tokens and stop strings,
and the same greedy text as one request at a time."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

pytest.importorskip("torch")

from mascot_eval.backends.base import ChatRequest, GenerationParams  # noqa: E402
from mascot_eval.backends.client import ClientSettings, ModelClient  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

REQUESTS = [
    # (messages, params): prompts of different lengths (left padding), own max_tokens and stops
    ([{"role": "user", "content": "Hi!"}], GenerationParams(max_tokens=6)),
    (
        [
            {"role": "system", "content": "You are a kind friend who answers in two sentences."},
            {"role": "user", "content": "I lost my keys again and I am late for work. What should I do?"},
        ],
        GenerationParams(max_tokens=14),
    ),
    ([{"role": "user", "content": "List three fruits, separated by commas."}], GenerationParams(max_tokens=12, stop=("\n",))),
    ([{"role": "user", "content": "Write one sentence about the sea."}], GenerationParams(max_tokens=16, stop=(",", "\n\n"))),
]


@contextlib.contextmanager
def queued_together(engine, n: int, monkeypatch):
    """Hold the engine's worker on a one-row blocker batch until ``n`` more requests are queued, so
    they are all waiting when it gathers its next batch: batching is then decided by what is queued,
    not by whether the callers made it within the 20 ms gathering window (a busy machine may not)."""
    blocked, release = threading.Event(), threading.Event()
    real_load, real_submit = engine.load, engine.submit
    submitted = []

    def load():
        if not blocked.is_set():
            blocked.set()
            release.wait()
        real_load()

    def submit(request, adapter):
        fut = real_submit(request, adapter)
        submitted.append(request)
        if len(submitted) == n:
            release.set()
        return fut

    monkeypatch.setattr(engine, "load", load)
    blocker = real_submit(ChatRequest([{"role": "user", "content": "Hold on."}], GenerationParams(max_tokens=1)), None)
    blocked.wait()  # the worker took the blocker alone and waits in load()
    monkeypatch.setattr(engine, "submit", submit)
    try:
        yield
    finally:
        release.set()
        blocker.result()
        monkeypatch.setattr(engine, "load", real_load)
        monkeypatch.setattr(engine, "submit", real_submit)


def test_concurrent_requests_are_batched_and_match_one_by_one(monkeypatch):
    client = ModelClient("embedded", ClientSettings(use_cache=False, max_connections=8))
    engine = client.backend.engine()

    async def one_by_one():
        return [await client.chat(m, p) for m, p in REQUESTS]

    async def together():
        return await asyncio.gather(*(client.chat(m, p) for m, p in REQUESTS))

    seq = asyncio.run(one_by_one())
    n_before = len(engine.batches)
    with queued_together(engine, len(REQUESTS), monkeypatch):
        par = asyncio.run(together())
    assert engine.batches[n_before:] == [1, len(REQUESTS)]  # the blocker, then one padded generate call for all four

    assert [r.text for r in par] == [r.text for r in seq]
    assert [r.finish_reason for r in par] == [r.finish_reason for r in seq]
    assert [r.usage.completion_tokens for r in par] == [r.usage.completion_tokens for r in seq]
    assert [r.usage.prompt_tokens for r in par] == [r.usage.prompt_tokens for r in seq]
    for (_, p), r in zip(REQUESTS, par):
        assert r.text.strip()
        assert r.usage.completion_tokens <= p.max_tokens  # each row keeps its own limit
        assert not any(s in r.text for s in p.stop)  # and its own stop strings
    assert par[0].finish_reason == "length" and par[0].usage.completion_tokens == 6
    assert par[2].finish_reason == "stop" and par[3].finish_reason == "stop"  # cut at their own stop strings
    assert par[1].usage.prompt_tokens > par[0].usage.prompt_tokens + 5  # rows of different lengths: left padding


def test_greedy_and_sampled_requests_share_one_batch_and_keep_their_decoding(monkeypatch):
    client = ModelClient("embedded", ClientSettings(use_cache=False, max_connections=8))
    engine = client.backend.engine()
    msg = [{"role": "user", "content": "Say one kind sentence about rain."}]
    greedy = GenerationParams(max_tokens=10)
    sampled = [GenerationParams(max_tokens=10, temperature=1.3, top_p=1.0, seed=7, sample_index=i) for i in range(3)]

    async def together():
        return await asyncio.gather(client.chat(msg, greedy), *(client.chat(msg, p) for p in sampled))

    alone = asyncio.run(client.chat(msg, greedy))
    n_before = len(engine.batches)
    with queued_together(engine, 4, monkeypatch):
        mixed = asyncio.run(together())
    assert engine.batches[n_before:] == [1, 4]  # the blocker, then one generate call for the greedy and the sampled rows
    assert mixed[0].text == alone.text  # the greedy row is still the arg-max continuation
    assert len({r.text for r in mixed[1:]}) >= 2  # sampled rows really sample (temperature 1.3)


def test_row_decoding_processor_by_hand():
    import torch

    from mascot_eval.backends.local import _row_decoding

    scores = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [0.5, 0.3, 0.2]]))
    out = _row_decoding([(0.0, 1.0), (1.0, 0.75), (1.0, 1.0)])[0](None, scores)
    assert torch.isinf(out[0, 1:]).all() and out[0, 0].isfinite()  # greedy: only the best token
    assert out[1, :2].isfinite().all() and torch.isinf(out[1, 2])  # top-p 0.75 keeps 0.5 + 0.3
    assert out[2].isfinite().all() and torch.allclose(out[2].softmax(-1), torch.tensor([0.5, 0.3, 0.2]))


def _decision_rows() -> list[tuple[list[dict[str, str]], GenerationParams]]:
    """Choice requests as a batch sees them: the cyclic rotations of two decisions (same long prompt, the
    numbered options last), a row with two prefill segments, and a short unrelated row."""
    opts = ["validate the feeling", "ask an open question", "name one strength", "suggest a small step"]
    out = []
    for situation in ("I failed my driving test twice and feel stupid.", "My manager ignored my proposal again today."):
        for r in range(len(opts)):
            shown = [opts[(k + r) % len(opts)] for k in range(len(opts))]
            listing = "\n".join(f"{i + 1}. {o}" for i, o in enumerate(shown))
            msgs = [
                {"role": "system", "content": "You are the Director of a group of companions helping one person."},
                {
                    "role": "user",
                    "content": f"Situation: {situation}\nWhat should the Anchor do?\n{listing}\nAnswer with the number only.",
                },
            ]
            out.append((msgs, GenerationParams(max_tokens=1, choices=("1", "2", "3", "4"))))
    out.append(
        (
            [{"role": "user", "content": "Rate the reply 'I hear you' from 1 to 5."}],
            GenerationParams(max_tokens=1, prefill=('{"score": ', '3, "other": '), choices=("1", "2", "3", "4", "5")),
        )
    )
    out.append(([{"role": "user", "content": "Pick 1 or 2."}], GenerationParams(max_tokens=1, choices=("1", "2"))))
    return out


def test_choice_rows_sharing_a_prefix_score_like_whole_rows(monkeypatch):
    """Prefix sharing (each decision's prompt computed once, its cache repeated for the rotations) gives the
    probabilities of one forward pass over each whole row, in one batch with rows that share nothing."""
    import torch

    from mascot_eval.backends import local

    client = ModelClient("embedded", ClientSettings(use_cache=False, max_connections=16))
    engine = client.backend.engine()
    reqs = _decision_rows()

    def batch(sharing: bool):
        monkeypatch.setattr(local, "PREFIX_SHARING", sharing)
        n_before = len(engine.batches)
        with queued_together(engine, len(reqs), monkeypatch):
            got = asyncio.run(_gather(client, reqs))
        assert engine.batches[n_before:] == [1, len(reqs)]  # the blocker, then one batch with every row
        return got

    seen = []
    real = local.shared_prefix_groups
    monkeypatch.setattr(local, "shared_prefix_groups", lambda *a: seen.append(real(*a)) or seen[-1])
    shared, whole = batch(True), batch(False)
    (groups,) = seen
    members = [sorted(m) for _, m in groups]
    assert [0, 1, 2, 3] in members and [4, 5, 6, 7] in members  # each decision's rotations share one prefix
    assert min(n for n, m in groups if len(m) == 4) > 30  # the whole prompt up to the option list
    # (the two short rows share only the chat template's default system message, and may group with each other)
    assert all(set(m) <= {8, 9} for m in members if not set(m) & set(range(8)))
    for s, w in zip(shared, whole):
        assert len(s.choice_probs) == len(w.choice_probs) and s.usage.prompt_tokens == w.usage.prompt_tokens
        for a, b in zip(s.choice_probs, w.choice_probs):
            assert list(a) == list(b) and list(a.values()) == pytest.approx(list(b.values()), abs=1e-4)
    # and against a plain forward pass over one row, outside the engine's batching
    tok, model = engine.tokenizer, engine.model
    msgs, params = reqs[1]
    ids = tok.encode(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True), add_special_tokens=False)
    digit_ids = [tok.encode(d, add_special_tokens=False)[0] for d in params.choices]
    with torch.inference_mode(), engine._use_adapter(None):
        want = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0, -1, digit_ids].float(), dim=-1).tolist()
    assert [shared[1].choice_probs[0][d] for d in params.choices] == pytest.approx(want, abs=1e-4)
    # the rotations really differ (the suffix pass reads each row's own option list)
    assert len({tuple(round(v, 3) for v in r.choice_probs[0].values()) for r in shared[:4]}) > 1


async def _gather(client, reqs):
    return await asyncio.gather(*(client.chat(m, p) for m, p in reqs))


def _director_rows(history: str, ask: str, opts: list[str]) -> list[tuple[list[dict[str, str]], GenerationParams]]:
    """The rotations of one Director decision: the dialogue so far, then the question and its options."""
    out = []
    for r in range(len(opts)):
        listing = "\n".join(f"{i + 1}. {opts[(i + r) % len(opts)]}" for i in range(len(opts)))
        msgs = [
            {"role": "system", "content": "You are the Director of a group of companions helping one person."},
            {"role": "user", "content": f"Conversation:\n{history}\n{ask}\n{listing}\nAnswer with the number only."},
        ]
        out.append((msgs, GenerationParams(max_tokens=1, choices=tuple(str(i + 1) for i in range(len(opts))))))
    return out


def test_prefix_cache_continues_a_dialogue_across_decisions(monkeypatch):
    """The speaker, action and tone decisions of one directive, and the next directive (one more turn), each
    continue from the cached prefix of the one before; a cold dialogue in the same batch runs in its own
    chunk. The probabilities equal those without the cache (and without prefix sharing at all)."""
    from mascot_eval.backends import local

    client = ModelClient("embedded", ClientSettings(use_cache=False, max_connections=32))
    engine = client.backend.engine()
    h1 = "User: I failed my driving test twice and I feel stupid. Everyone else passed at once.\n" * 3
    h2 = h1 + "Anchor: That sounds painful; failing twice does not make you stupid.\n"
    other = "User: My manager ignored my proposal again today, in front of the whole team.\n" * 3
    steps = [
        _director_rows(h1, "Who should speak next?", ["Anchor", "Catalyst", "Beacon"]),
        _director_rows(h1, "Anchor speaks next. What should Anchor do?", ["validate", "ask", "encourage", "plan"]),
        _director_rows(h2, "Who should speak next?", ["Catalyst", "Beacon"])
        + _director_rows(other, "Who should speak next?", ["Anchor", "Catalyst", "Beacon"]),
    ]

    def run_steps(limit_mb: float, sharing: bool = True):
        monkeypatch.setattr(local, "PREFIX_SHARING", sharing)
        engine.prefix_kv = local.PrefixKV(limit_mb)
        got, chunks = [], []
        real = local._chunks
        monkeypatch.setattr(local, "_chunks", lambda plan: chunks.append(real(plan)) or chunks[-1])
        for reqs in steps:
            with queued_together(engine, len(reqs), monkeypatch):
                got.append(asyncio.run(_gather(client, reqs)))
        return got, engine.prefix_kv, chunks

    cached, kv, chunks = run_steps(256)
    assert kv.hits >= 2 and kv.tokens_reused > 2 * 60  # step 2 continued step 1's prefix, step 3 the dialogue's
    *_, last = chunks
    assert len(last) == 2  # the cold dialogue (its whole prompt) and the continued one (a turn) apart
    assert {len(g.members) for g in last[0]} == {3} and last[1][0].cached > 60  # cold one first: more new tokens
    keys = [k for _, k in kv.entries]  # an extended prefix replaces the one it extends
    assert len(keys) == 4 and not any(a != b and b[: len(a)] == a for a in keys for b in keys)
    plain, kv0, _ = run_steps(0)
    assert kv0.hits == 0 and not kv0.entries
    whole, _, _ = run_steps(0, sharing=False)
    for a_step, b_step, c_step in zip(cached, plain, whole):
        for a, b, c in zip(a_step, b_step, c_step):
            assert list(a.choice_probs[0]) == list(b.choice_probs[0]) == list(c.choice_probs[0])
            assert list(a.choice_probs[0].values()) == pytest.approx(list(c.choice_probs[0].values()), abs=1e-4)
            assert list(b.choice_probs[0].values()) == pytest.approx(list(c.choice_probs[0].values()), abs=1e-4)


def test_prefix_cache_is_bounded_by_its_memory_limit(monkeypatch):
    import torch

    from mascot_eval.backends import local
    from mascot_eval.errors import UserError

    kv = local.PrefixKV(limit_mb=1)
    layer = (torch.zeros(1, 2, 1000, 32), torch.zeros(1, 2, 1000, 32))  # 512 KB per entry
    kv.store(None, list(range(1000)), [layer])
    kv.store(None, list(range(2000, 3000)), [layer])
    kv.store(None, list(range(5000, 6000)), [layer])  # the first one is evicted
    assert kv.bytes <= 2**20 and len(kv.entries) == 2
    assert kv.lookup(None, list(range(500)) + [7]) == (0, None)
    n, entry = kv.lookup(None, list(range(2000, 2100)) + [1])
    assert n == 100 and entry is not None and kv.lookup("adapter", list(range(2000, 2100)))[1] is None
    monkeypatch.setenv("MASCOT_PREFIX_CACHE_MB", "lots")
    with pytest.raises(UserError, match="MASCOT_PREFIX_CACHE_MB"):
        local.PrefixKV()
    monkeypatch.setenv("MASCOT_PREFIX_CACHE_MB", "0")
    assert not local.PrefixKV().enabled
