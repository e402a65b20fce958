"""Judges with ``mode: logprob``: scores read from next-token probabilities of a prefilled verdict.

The fast tests use a scripted choice-scoring backend (tests/fakes.py, ``fakeprobs/``); the ``torch``
tests run the embedded model's engine and the shipped ``local`` judge for real.
"""

from __future__ import annotations

import asyncio

import pytest

from mascot_eval.backends.base import GenerationParams
from mascot_eval.backends.cache import cache_key
from mascot_eval.backends.client import get_client
from mascot_eval.criteria import AGENT_CRITERIA, GROUP_CRITERIA
from mascot_eval.errors import UserError
from mascot_eval.judges.score import DIGITS, Judge, judge_transcript, score_response
from mascot_eval.judges.specs import JudgeSpec, parse_judges, resolve_judge
from mascot_eval.judges.threeway import compare_async, summarize_comparisons
from mascot_eval.runs.rundir import RunDir
from tests import fakes
from tests.judge_helpers import CARDS, transcript

# a distribution per criterion position: peaked at 4 (expected 3.9) for the first, flat for the rest
PEAKED = {"1": 0.0, "2": 0.1, "3": 0.1, "4": 0.6, "5": 0.2}
FLAT = {d: 0.2 for d in DIGITS}


def _spec(model: str, name: str = "lp") -> JudgeSpec:
    return JudgeSpec(name=name, model=model, mode="logprob")


def _first_peaked(req):
    return [PEAKED if i == 0 else FLAT for i in range(len(req.params.prefill))]


def test_scores_are_the_most_probable_digit_and_weighted_the_expected_one(fake_model, tmp_cache):
    model = fakes.script_probs("lp-agent", _first_peaked)
    rows = asyncio.run(judge_transcript(_spec(model), transcript(), cards=CARDS))
    assert len(rows) == 3 * len(AGENT_CRITERIA) + len(GROUP_CRITERIA) and all(r["status"] == "scored" for r in rows)
    for r in rows:
        first = r["criterion"] == (AGENT_CRITERIA if r["level"] == "agent" else GROUP_CRITERIA)[0]
        if first:
            assert r["score"] == 4 and r["score_100"] == 75.0 and r["weighted_score"] == pytest.approx(3.9)
        else:  # a flat distribution: the first digit wins the arg-max tie, the expectation is 3
            assert r["score"] == 1 and r["weighted_score"] == pytest.approx(3.0)
        assert r["rationale"] is None
        if first:  # the unit's usage sits on its first criterion row
            assert r["usage"]["calls"] == 1 and r["usage"]["completion_tokens"] == 0
        else:
            assert r["usage"] is None
    # one request per unit, nothing generated: the verdict JSON is prefilled up to each criterion
    reqs = fakes.CALLS["lp-agent"]
    assert len(reqs) == 4
    agent_req = next(q for q in reqs if len(q.params.prefill) == len(AGENT_CRITERIA))
    assert agent_req.params.choices == DIGITS and agent_req.params.max_tokens == 1
    assert "".join(agent_req.params.prefill) + "3}" == (
        '{"rationale": "", ' + ", ".join(f'"{c}": 3' for c in AGENT_CRITERIA) + "}"
    )


def test_a_short_probability_answer_is_unscored_not_zero(fake_model, tmp_cache):
    model = fakes.script_probs("lp-short", lambda req: [PEAKED])
    rows = asyncio.run(judge_transcript(_spec(model), transcript(), levels=("group",), cards=CARDS))
    assert all(r["status"] == "unscored" and r["score"] is None for r in rows)
    assert rows[0]["reason"] == f"logprob: 1 probability rows for {len(GROUP_CRITERIA)} prefill segments"


def test_a_failed_call_is_unscored_with_its_reason(fake_model, tmp_cache):
    from mascot_eval.backends.base import BackendError

    def fail(req):
        raise BackendError("model fell over", retryable=False)

    model = fakes.script_probs("lp-fail", fail)
    rows = asyncio.run(judge_transcript(_spec(model), transcript(), levels=("group",), cards=CARDS))
    assert all(r["status"] == "call_failed" and r["score"] is None and r["reason"].startswith("call_failed:") for r in rows)
    assert rows[0]["usage"]["failures"] == 1 and rows[0]["usage"]["calls"] == 1


def test_score_response_gives_expected_digits_for_training(fake_model, tmp_cache):
    model = fakes.script_probs("lp-resp", _first_peaked)
    got = asyncio.run(
        score_response(_spec(model), persona=CARDS[0], history=[{"role": "user", "content": "hi"}], response="I hear you.")
    )
    assert got == pytest.approx({c: (3.9 if i == 0 else 3.0) for i, c in enumerate(AGENT_CRITERIA)})


def test_choice_scores_are_cached_and_old_cache_keys_stay_valid(fake_model, tmp_cache):
    model = fakes.script_probs("lp-cache", _first_peaked)
    j = Judge(_spec(model))
    first = asyncio.run(j.ask_logprob("rate this", AGENT_CRITERIA))
    again = asyncio.run(j.ask_logprob("rate this", AGENT_CRITERIA))
    assert len(fakes.CALLS["lp-cache"]) == 1 and again.response.cached and again.weighted == first.weighted
    # the two choice-scoring fields enter the key only when set: keys computed before they existed
    ident, msgs = {"kind": "fake", "model": "m", "endpoint": None}, [{"role": "user", "content": "hi"}]
    assert cache_key(ident, msgs, GenerationParams()) == "c6e6a57c24996f540bfcf0a0079efa9e7e27a3a3"
    assert cache_key(ident, msgs, GenerationParams(max_tokens=9, temperature=0.7, stop=("x",), top_logprobs=5)) == (
        "3261bc7d94aa82d42852c728b906e68acbd6e302"
    )
    assert cache_key(ident, msgs, GenerationParams(prefill=("a",), choices=("1",))) != cache_key(ident, msgs, GenerationParams())


def test_logprob_mode_needs_a_backend_that_scores_choices(fake_model, tmp_path):
    with pytest.raises(UserError, match=r"field 'mode' is logprob but model 'fake/x' cannot score"):
        Judge(_spec("fake/x"))
    (tmp_path / "mine.yaml").write_text("name: mine\nmodel: openai/gpt-4o\nmode: logprob\n")
    spec = resolve_judge("mine", tmp_path)
    with pytest.raises(UserError, match=r"mine.yaml: field 'mode' is logprob but model 'openai/gpt-4o'"):
        Judge(spec)
    assert [s.name for s in parse_judges("local")] == ["local"]  # the embedded model can
    with pytest.raises(UserError, match="cannot score choices"):  # the client refuses too
        asyncio.run(get_client("fake/x").chat([{"role": "user", "content": "hi"}], GenerationParams(choices=DIGITS)))


def test_threeway_in_logprob_mode_always_a_is_pure_position_bias(fake_model, tmp_path, tmp_cache):
    model = fakes.script_probs("lp-3way", lambda req: [{"A": 0.5, "B": 0.3, "C": 0.2}])
    ts = [
        transcript(system=s, context_id=f"c{i}", agent_text=f"[{s}] reply for c{i}")
        for s in ("mascot", "multiagentesc", "zeroshot")
        for i in range(3)
    ]
    out = RunDir(tmp_path / "cmp", create=True)
    res = asyncio.run(compare_async(ts, [_spec(model)], out, order_mode="all", progress=False))
    assert res.new == 3 * 6 and res.unscored == 0
    rows = list(out.comparisons())
    req = fakes.CALLS["lp-3way"][0]
    assert req.params.prefill == ('{"rationale": "", "best": "',) and req.params.choices == ("A", "B", "C")
    assert all(r["best_label"] == "A" and r["ranking_systems"] == r["order"] for r in rows)
    j = summarize_comparisons(rows, n_boot=100)["judges"]["lp"]
    assert j["first_position_rate"]["mean"] == 1.0
    assert all(v["win"]["mean"] == pytest.approx(1 / 3) for v in j["systems"].values())


def test_shipped_local_judge_is_logprob_on_the_embedded_model():
    spec = resolve_judge("local")
    assert spec.mode == "logprob" and spec.model == "embedded"
    assert resolve_judge("gpt").mode == resolve_judge("claude").mode == "generate"


# -- the embedded model for real ---------------------------------------------------------------


@pytest.mark.torch
def test_embedded_engine_choice_probabilities_match_a_direct_forward_pass(tmp_cache):
    import torch

    from mascot_eval.backends.local import EmbeddedBackend

    client = get_client("embedded")
    msgs = [{"role": "user", "content": "Rate the reply 'I hear you' from 1 to 5."}]
    params = GenerationParams(max_tokens=1, prefill=('{"score": ', '3, "other": '), choices=DIGITS)
    other = [{"role": "user", "content": "A much longer question so that the batch needs padding: rate 'ok' 1-5."}]

    async def both():
        return await asyncio.gather(client.chat(msgs, params), client.chat(other, params))

    got, _ = asyncio.run(both())
    assert len(got.choice_probs) == 2 and got.text == "" and got.usage.completion_tokens == 0
    for row in got.choice_probs:
        assert set(row) == set(DIGITS) and sum(row.values()) == pytest.approx(1.0, abs=1e-5)
    eng = EmbeddedBackend("embedded").engine()
    tok, model = eng.tokenizer, eng.model
    ids = tok.encode(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True), add_special_tokens=False)
    ids += tok.encode('{"score": ', add_special_tokens=False)
    digit_ids = [tok.encode(d, add_special_tokens=False)[0] for d in DIGITS]
    with torch.inference_mode(), eng._use_adapter(None):  # base weights (earlier tests may have attached LoRAs)
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1, digit_ids]
    want = torch.softmax(logits.float(), dim=-1).tolist()
    assert [got.choice_probs[0][d] for d in DIGITS] == pytest.approx(want, abs=1e-4)  # padding and batching change nothing


@pytest.mark.torch
def test_local_judge_scores_every_unit_on_the_embedded_model(tmp_cache):
    rows = asyncio.run(judge_transcript("local", transcript(), cards=CARDS))
    assert len(rows) == 3 * len(AGENT_CRITERIA) + len(GROUP_CRITERIA)
    assert all(r["status"] == "scored" and r["score"] in (1, 2, 3, 4, 5) for r in rows)
    assert all(1.0 <= r["weighted_score"] <= 5.0 for r in rows)
    # a reply that ignores the user scores differently from a caring one (the model reads the input)
    a = asyncio.run(
        score_response(
            "local",
            persona=CARDS[0],
            history=[{"role": "user", "content": "I failed my exam."}],
            response="That sounds really hard; it makes sense to feel low.",
        )
    )
    b = asyncio.run(
        score_response(
            "local", persona=CARDS[0], history=[{"role": "user", "content": "I failed my exam."}], response="lol whatever"
        )
    )
    assert a != b and all(1.0 <= v <= 5.0 for v in (*a.values(), *b.values()))


def test_shared_prefix_groups_by_hand():
    from mascot_eval.backends.local import shared_prefix_groups

    base = list(range(100, 140))  # a 40-token prompt shared by three rotations
    rows = [base + [1, 2, 3, 9], base + [2, 3, 1, 9], base + [3, 1, 2, 9], [5, 6, 7], base[:20] + [7] * 30]
    marks = [[len(r) - 1] for r in rows]
    groups = shared_prefix_groups(rows, marks)
    assert sorted((n, sorted(m)) for n, m in groups) == [(2, [3]), (40, [0, 1, 2]), (49, [4])]
    # a prefix stops before the first position whose logits are read (here inside the shared part)
    marks[1] = [30, len(rows[1]) - 1]
    assert (30, [0, 1, 2]) in [(n, sorted(m)) for n, m in shared_prefix_groups(rows, marks)]
