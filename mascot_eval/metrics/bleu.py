"""Sentence BLEU for many (hypothesis, references) jobs at once, equal to nltk's ``sentence_bleu``.

The value of each job is exactly what
``nltk.translate.bleu_score.sentence_bleu(refs, hyp, weights=(0.25,)*4,
smoothing_function=SmoothingFunction(epsilon=0.1).method1)`` returns (to floating-point rounding;
the tests and the benchmark check 1e-9): clipped n-gram precisions p_1..p_4 (a reference count is
the maximum over references), a precision with zero matches replaced by epsilon / (number of
hypothesis n-grams, at least 1), brevity penalty from the closest reference length (ties -> the
shorter), BLEU = BP * exp(sum_n w_n log p_n), and 0 when no unigram matches.

It is fast because the n-grams of every text are counted once (:class:`NgramIndex`, a sparse
text x n-gram count matrix per order) and the clipped matches of all jobs come from a few sparse
row gathers and element-wise maximum/minimum operations in scipy's compiled CSR code, not from one
Counter per pair.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .ngrams import NgramIndex, ranges

WEIGHTS = (0.25, 0.25, 0.25, 0.25)
EPSILON = 0.1  # nltk SmoothingFunction().method1 default


def bleu_jobs(
    index: NgramIndex,
    hyps: Sequence[int],
    refs: Sequence[Sequence[int]],
    *,
    weights: Sequence[float] = WEIGHTS,
    epsilon: float = EPSILON,
) -> np.ndarray:
    """BLEU of sequence ``hyps[j]`` against sequences ``refs[j]`` (ids into ``index``), per job j."""
    n_jobs = len(hyps)
    if n_jobs == 0:
        return np.zeros(0)
    max_n = len(weights)
    if max_n > index.max_n:
        raise ValueError(f"index holds n-grams up to {index.max_n}, weights need {max_n}")
    hyp = np.asarray(hyps, dtype=np.int64)
    n_refs = np.fromiter((len(r) for r in refs), dtype=np.int64, count=n_jobs)
    if (n_refs == 0).any():
        raise ValueError("every BLEU job needs at least one reference")
    ref_flat = np.fromiter((i for r in refs for i in r), dtype=np.int64, count=int(n_refs.sum()))
    pair_job = np.repeat(np.arange(n_jobs, dtype=np.int64), n_refs)

    hyp_len = index.lengths[hyp]
    # closest reference length: min over refs of (|r - h|, r)
    ref_len = index.lengths[ref_flat]
    big = int(index.lengths.max(initial=0)) + 1
    score = np.abs(ref_len - hyp_len[pair_job]) * big + ref_len
    job_start = np.concatenate([[0], np.cumsum(n_refs)[:-1]])
    closest = np.minimum.reduceat(score, job_start) % big

    log_sum = np.zeros(n_jobs)
    unigram_matches = None
    # reference slot t of every job; jobs with fewer references point at an empty row
    empty = index.n_seq
    slots = []
    for t in range(int(n_refs.max())):
        slot = np.full(n_jobs, empty, dtype=np.int64)
        has = np.nonzero(n_refs > t)[0]
        slot[has] = ref_flat[job_start[has] + t]
        slots.append(slot)
    for n in range(1, max_n + 1):
        # rows = texts (plus one empty row), columns = n-grams, values = counts. The clipped count
        # of a job's n-gram is min(hypothesis count, max over references): sparse row gathers and
        # element-wise maximum/minimum, all in scipy's compiled CSR routines.
        x = index.matrix(n, extra_rows=1)
        ref_max = x[slots[0]]
        for slot in slots[1:]:
            ref_max = ref_max.maximum(x[slot])
        num = np.asarray(x[hyp].minimum(ref_max).sum(axis=1), dtype=np.float64).ravel()
        den = np.maximum(1, hyp_len - n + 1).astype(float)
        if n == 1:
            unigram_matches = num
        p = np.where(num == 0, epsilon / den, num / den)
        log_sum = log_sum + weights[n - 1] * np.log(p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bp = np.where(hyp_len > closest, 1.0, np.where(hyp_len == 0, 0.0, np.exp(1 - closest / np.maximum(hyp_len, 1))))
    out = bp * np.exp(log_sum)
    assert unigram_matches is not None
    out[unigram_matches == 0] = 0.0
    return out


def nltk_sentence_bleu(hyp_tokens: list[str], ref_tokens: list[list[str]], epsilon: float = EPSILON) -> float:
    """The reference implementation (nltk), used by tests and the benchmark."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return float(
        sentence_bleu(ref_tokens, hyp_tokens, weights=WEIGHTS, smoothing_function=SmoothingFunction(epsilon=epsilon).method1)
    )


def self_bleu_groups(token_lists: Sequence[Sequence[str]], groups: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """For each group of text indices: BLEU of every member against the other members."""
    index = NgramIndex(token_lists, max_n=4)
    hyps: list[int] = []
    refs: list[list[int]] = []
    for grp in groups:
        for i in grp:
            hyps.append(i)
            refs.append([j for j in grp if j != i] if len(grp) > 1 else [])
    vals = bleu_jobs(index, hyps, refs)
    out, pos = [], 0
    for grp in groups:
        out.append(vals[pos : pos + len(grp)])
        pos += len(grp)
    return out


__all__ = ["bleu_jobs", "nltk_sentence_bleu", "self_bleu_groups", "ranges"]
