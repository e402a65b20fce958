"""Vectorised BLEU against nltk and sacrebleu, bit-parallel ROUGE-L against rouge-score, and the
inter-agent / self-repetition metrics built on them, with hand-computed values."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from rouge_score import rouge_scorer

from mascot_eval.metrics.bleu import bleu_jobs, nltk_sentence_bleu, self_bleu_groups, self_bleu_jobs
from mascot_eval.metrics.compute import compute
from mascot_eval.metrics.ngrams import NgramIndex
from mascot_eval.metrics.rouge import RougeL, lcs_length
from mascot_eval.metrics.tokenize import tokenize
from tests.metric_helpers import dialogue, one, values


def _random_corpus(seed: int, n: int = 120) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(12)]
    out = []
    for _ in range(n):
        length = int(rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 12, 20]))
        out.append([vocab[i] for i in rng.integers(0, len(vocab), length)])
    return out


def test_bleu_hand_computed():
    # p1 = 3/4, p2 = 2/3, p3 = 1/2, p4 = 0 matches -> epsilon 0.1 / 1; equal lengths -> BP = 1
    idx = NgramIndex([["a", "b", "c", "d"], ["a", "b", "c", "e"]])
    got = bleu_jobs(idx, [0], [[1]])[0]
    assert got == pytest.approx((0.75 * (2 / 3) * 0.5 * 0.1) ** 0.25, abs=1e-12)
    assert got == pytest.approx(0.3976353643835253, abs=1e-12)
    # identical texts -> 1; no shared unigram -> 0
    idx = NgramIndex([["x", "y", "z", "w"], ["x", "y", "z", "w"], ["p", "q"]])
    assert list(bleu_jobs(idx, [0, 2], [[1], [0]])) == [pytest.approx(1.0), 0.0]
    # brevity penalty: hypothesis of 2 tokens, reference of 4 -> exp(1 - 4/2)
    idx = NgramIndex([["x", "y"], ["x", "y", "z", "w"]])
    p = [1.0, 1.0, 0.1 / 1, 0.1 / 1]
    assert bleu_jobs(idx, [0], [[1]])[0] == pytest.approx(math.exp(1 - 2) * math.prod(p) ** 0.25, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bleu_equals_nltk_sentence_bleu(seed):
    toks = _random_corpus(seed)
    rng = np.random.default_rng(100 + seed)
    hyps, refs = [], []
    for _ in range(400):
        h = int(rng.integers(0, len(toks)))
        k = int(rng.integers(1, 4))
        refs.append([int(r) for r in rng.integers(0, len(toks), k)])
        hyps.append(h)
    ours = bleu_jobs(NgramIndex(toks), hyps, refs)
    for h, rs, v in zip(hyps, refs, ours):
        assert abs(v - nltk_sentence_bleu(toks[h], [toks[r] for r in rs])) <= 1e-9


def test_bleu_equals_nltk_on_real_like_text_and_ties():
    texts = [
        "I hear you, that sounds really hard.",
        "That sounds really hard, I hear you!",
        "Have you tried a walk?",
        "hard hard hard hard",
        "I",
        "",
        "You are not alone in this; many people feel the same way.",
        "Same way, same people, same feelings.",
    ]
    toks = [tokenize(t) for t in texts]
    idx = NgramIndex(toks)
    jobs = [(h, [r for r in range(len(texts)) if r != h]) for h in range(len(texts))]
    jobs += [(0, [1]), (2, [4, 5]), (3, [0, 3]), (7, [6])]
    ours = bleu_jobs(idx, [h for h, _ in jobs], [r for _, r in jobs])
    for (h, rs), v in zip(jobs, ours):
        assert abs(v - nltk_sentence_bleu(toks[h], [toks[r] for r in rs])) <= 1e-9
    # closest reference length ties go to the shorter one (nltk): hyp of 4, refs of 3 and 5
    idx = NgramIndex([["a", "b", "c", "d"], ["a", "b", "c"], ["a", "b", "c", "d", "e"]])
    v = bleu_jobs(idx, [0], [[1, 2]])[0]
    assert abs(v - nltk_sentence_bleu(["a", "b", "c", "d"], [["a", "b", "c"], ["a", "b", "c", "d", "e"]])) <= 1e-12


def test_bleu_matches_sacrebleu_floor_smoothing():
    """sacrebleu with 'floor' smoothing (zero counts -> 0.1 / n-grams), no effective order and
    whitespace tokens computes the same sentence BLEU (as a percentage)."""
    from sacrebleu.metrics import BLEU

    scorer = BLEU(smooth_method="floor", smooth_value=0.1, tokenize="none", effective_order=False, lowercase=False)
    toks = [t for t in _random_corpus(5, 200) if len(t) >= 4]  # every order has a hypothesis n-gram
    rng = np.random.default_rng(7)
    idx = NgramIndex(toks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(150):
            h = int(rng.integers(0, len(toks)))
            rs = [int(r) for r in rng.integers(0, len(toks), int(rng.integers(1, 4)))]
            ours = bleu_jobs(idx, [h], [rs])[0]
            ref = scorer.sentence_score(" ".join(toks[h]), [" ".join(toks[r]) for r in rs]).score / 100
            if ours == 0.0:  # nltk (and we) return 0 without a unigram match; sacrebleu floors p1
                assert not set(toks[h]) & {w for r in rs for w in toks[r]}
            else:
                assert ours == pytest.approx(ref, abs=1e-9)


def test_self_bleu_groups():
    toks = [tokenize(t) for t in ["a b c d", "a b c e", "x y z w"]]
    out = self_bleu_groups(toks, [[0, 1], [0, 1, 2]])
    assert out[0][0] == pytest.approx(0.3976353643835253) and out[0][1] == pytest.approx(0.3976353643835253)
    assert out[1][2] == 0.0


def _group_with_ties(seed: int, size: int, max_len: int = 12) -> list[list[str]]:
    """``size`` short texts over a small vocabulary, with exact duplicates and one text holding a
    unique maximum count, so every leave-one-out case (shared maximum, sole maximum, below) occurs."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(8)]
    out = [[vocab[i] for i in rng.integers(0, len(vocab), int(rng.integers(0, max_len + 1)))] for _ in range(size)]
    if size >= 4:
        out[1] = list(out[0])  # a duplicate: the maximum is shared
        out[2] = ["w0"] * (max_len + 3)  # the sole maximum count of "w0", "w0 w0", ...
        out[3] = []  # an empty text
    return out


@pytest.mark.parametrize("size", [2, 3, 4, 10, 100, 250])
def test_self_bleu_jobs_equals_nltk_at_group_sizes(size):
    toks = _group_with_ties(size, size, max_len=6 if size > 100 else 12)
    ours = self_bleu_jobs(NgramIndex(toks), [list(range(size))])
    assert len(ours) == size
    for i, v in enumerate(ours):
        assert abs(v - nltk_sentence_bleu(toks[i], [toks[j] for j in range(size) if j != i])) <= 1e-12


@pytest.mark.slow
def test_self_bleu_1000_group_equals_nltk():
    """One group of 1,000 short texts against a plain nltk loop (about half a CPU-minute of nltk)."""
    toks = _group_with_ties(1000, 1000, max_len=5)
    ours = self_bleu_jobs(NgramIndex(toks), [list(range(1000))])
    ref = [nltk_sentence_bleu(toks[i], toks[:i] + toks[i + 1 :]) for i in range(1000)]
    assert float(np.max(np.abs(ours - np.asarray(ref)))) <= 1e-12
    assert 0.0 < float(np.mean(ref)) < 1.0


def test_self_bleu_jobs_equals_bleu_jobs_on_many_groups():
    """Many groups at once (sizes 2..40, a text in several groups, a text twice in one group):
    the leave-one-out route equals the general per-reference route."""
    toks = _random_corpus(11, 300) + [["w1", "w1", "w1", "w1", "w1", "w2"], ["w1", "w1", "w1", "w1", "w1", "w2"]]
    idx = NgramIndex(toks)
    rng = np.random.default_rng(12)
    groups = [[int(x) for x in rng.integers(0, len(toks), int(rng.integers(2, 41)))] for _ in range(120)]
    groups += [[300, 301], [300, 301, 5], [300, 300, 7, 7, 7], [3, 3]]
    hyps = [i for g in groups for i in g]
    refs = [g[:k] + g[k + 1 :] for g in groups for k in range(len(g))]
    want = bleu_jobs(idx, hyps, refs)
    got = self_bleu_jobs(idx, groups)
    assert got.shape == want.shape and float(np.max(np.abs(got - want))) <= 1e-12
    assert self_bleu_jobs(idx, []).shape == (0,)
    with pytest.raises(ValueError, match="two members"):
        self_bleu_jobs(idx, [[0, 1], [2]])


def test_lcs_by_hand_and_against_dynamic_programming():
    assert lcs_length(list("abcbdab"), list("bdcaba")) == 4
    assert lcs_length([], ["a"]) == 0
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = [str(x) for x in rng.integers(0, 4, rng.integers(0, 70))]
        b = [str(x) for x in rng.integers(0, 4, rng.integers(0, 70))]
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(len(a)):
            for j in range(len(b)):
                table[i + 1][j + 1] = table[i][j] + 1 if a[i] == b[j] else max(table[i][j + 1], table[i + 1][j])
        assert lcs_length(a, b) == table[-1][-1]


def test_rouge_l_equals_rouge_score():
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    texts = [
        "I hear you, that sounds really hard.",
        "That sounds really hard, I hear you!",
        "Have you tried a walk?",
        "",
        "...",
        "the the the cat",
        "The cat sat on the mat; the mat was red.",
        "Caf\u00e9 na\u00efve 42 times",
        "a " * 80 + "b",
        "b " + "a " * 79,
    ]
    rouge = RougeL()
    for a, b in itertools.product(texts, repeat=2):
        assert rouge(a, b) == pytest.approx(scorer.score(a, b)["rougeL"].fmeasure, abs=1e-12)


def test_inter_agent_redundancy_by_hand():
    d = dialogue(
        [
            ("u1", [("A", "a b c d"), ("B", "a b c e")]),
            ("u2", [("A", "the cat sat"), ("B", "the cat ran"), ("C", "dogs bark loudly")]),
            ("u3", [("A", "only one agent here")]),
        ],
        agents=["A", "B", "C"],
    )
    df = compute([d], ["inter_agent_selfbleu", "inter_agent_rougeL"])
    assert one(df, "inter_agent_selfbleu", round=1) == pytest.approx(0.3976353643835253)
    # round 2: BLEU of each turn against the other two (nltk), averaged
    t = [tokenize(x) for x in ("the cat sat", "the cat ran", "dogs bark loudly")]
    exp = np.mean([nltk_sentence_bleu(t[i], [t[j] for j in range(3) if j != i]) for i in range(3)])
    assert one(df, "inter_agent_selfbleu", round=2) == pytest.approx(exp, abs=1e-12)
    # ROUGE-L: (a b c d, a b c e) -> LCS 3 of 4 -> F = 0.75; round 2 pairs: 2/3, 0, 0
    assert one(df, "inter_agent_rougeL", round=1) == pytest.approx(0.75)
    assert one(df, "inter_agent_rougeL", round=2) == pytest.approx((2 / 3) / 3)
    assert values(df, "inter_agent_selfbleu", round=3) == []
    assert df.attrs["notes"]["inter_agent_selfbleu: round with a single agent turn"] == 1


def test_self_repetition_bleu_by_hand():
    d = dialogue(
        [
            ("u1", [("A", "a b c e"), ("B", "x y z w")]),
            ("u2", [("A", "a b c d"), ("B", "x y z w")]),
            ("u3", [("A", "q r s t")]),
        ]
    )
    df = compute([d], ["self_repetition_bleu"])
    assert values(df, "self_repetition_bleu", agent="A") == [pytest.approx(0.3976353643835253), 0.0]
    assert values(df, "self_repetition_bleu", agent="B") == [pytest.approx(1.0)]
    assert list(df[df["agent"] == "A"]["round"]) == [2, 3]  # an agent's first turn has no row
    # round 3 uses both earlier turns of A as references (nltk multi-reference)
    d2 = dialogue([("u", [("A", "a b c e")]), ("u", [("A", "q r s t")]), ("u", [("A", "a b c e q r")])])
    df2 = compute([d2], ["self_repetition_bleu"])
    exp = nltk_sentence_bleu(list("abceqr"), [list("abce"), list("qrst")])
    assert values(df2, "self_repetition_bleu")[-1] == pytest.approx(exp, abs=1e-12)
