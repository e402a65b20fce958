"""Sentence BLEU for many (hypothesis, references) jobs at once, equal to nltk's ``sentence_bleu``.

The value of each job is exactly what
``nltk.translate.bleu_score.sentence_bleu(refs, hyp, weights=(0.25,)*4,
smoothing_function=SmoothingFunction(epsilon=0.1).method1)`` returns (to floating-point rounding;
the tests and the benchmarks check 1e-12): clipped n-gram precisions p_1..p_4 (a reference count is
the maximum over references), a precision with zero matches replaced by epsilon / (number of
hypothesis n-grams, at least 1), brevity penalty from the closest reference length (ties -> the
shorter), BLEU = BP * exp(sum_n w_n log p_n), and 0 when no unigram matches.

It is fast because the n-grams of every text are counted once (:class:`NgramIndex`, a sparse
text x n-gram count matrix per order). :func:`bleu_jobs` (any references) clips all jobs with a
few sparse row gathers and element-wise maximum/minimum operations in scipy's compiled CSR code,
not one Counter per pair. :func:`self_bleu_jobs` (every member of a group against the others)
needs no per-reference work at all: the leave-one-out maximum of an n-gram's count is the group's
maximum or its second maximum, so a group costs one sort of its n-grams, however many members.
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

    # reference slot t of every job; jobs with fewer references point at an empty row
    empty = index.n_seq
    slots = []
    for t in range(int(n_refs.max())):
        slot = np.full(n_jobs, empty, dtype=np.int64)
        has = np.nonzero(n_refs > t)[0]
        slot[has] = ref_flat[job_start[has] + t]
        slots.append(slot)
    nums = []
    for n in range(1, max_n + 1):
        # rows = texts (plus one empty row), columns = n-grams, values = counts. The clipped count
        # of a job's n-gram is min(hypothesis count, max over references): sparse row gathers and
        # element-wise maximum/minimum, all in scipy's compiled CSR routines.
        x = index.matrix(n, extra_rows=1)
        ref_max = x[slots[0]]
        for slot in slots[1:]:
            ref_max = ref_max.maximum(x[slot])
        nums.append(np.asarray(x[hyp].minimum(ref_max).sum(axis=1), dtype=np.float64).ravel())
    return _combine(hyp_len, closest, nums, weights, epsilon)


def _combine(
    hyp_len: np.ndarray, closest: np.ndarray, nums: list[np.ndarray], weights: Sequence[float], epsilon: float
) -> np.ndarray:
    """BLEU from clipped match counts per order (``nums[n-1]``), hypothesis and closest reference lengths."""
    log_sum = np.zeros(len(hyp_len))
    for n, num in enumerate(nums, start=1):
        den = np.maximum(1, hyp_len - n + 1).astype(float)
        p = np.where(num == 0, epsilon / den, num / den)
        log_sum = log_sum + weights[n - 1] * np.log(p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bp = np.where(hyp_len > closest, 1.0, np.where(hyp_len == 0, 0.0, np.exp(1 - closest / np.maximum(hyp_len, 1))))
    out = bp * np.exp(log_sum)
    out[nums[0] == 0] = 0.0
    return out


def self_bleu_jobs(
    index: NgramIndex,
    groups: Sequence[Sequence[int]],
    *,
    weights: Sequence[float] = WEIGHTS,
    epsilon: float = EPSILON,
) -> np.ndarray:
    """Leave-one-out BLEU: every member of every group (ids into ``index``) against the group's
    other members, concatenated in group order. Equal to :func:`bleu_jobs` with those jobs.

    Work is proportional to the groups' total n-grams (one sort), not to members x references:
    the reference count of an n-gram with member i left out is the group's maximum count, or its
    second largest count (over members, with multiplicity) when member i holds the maximum; so the
    clipped count of member i is its own count when that is below the group maximum and the second
    largest count otherwise. The closest reference length is found among the two neighbours of a
    member in its group's length order.
    """
    sizes = np.fromiter((len(g) for g in groups), dtype=np.int64, count=len(groups))
    if len(sizes) == 0 or sizes.sum() == 0:
        return np.zeros(0)
    if (sizes < 2).any():
        raise ValueError("every BLEU job needs at least one reference (a self-BLEU group needs two members)")
    max_n = len(weights)
    if max_n > index.max_n:
        raise ValueError(f"index holds n-grams up to {index.max_n}, weights need {max_n}")
    seq = np.fromiter((i for g in groups for i in g), dtype=np.int64, count=int(sizes.sum()))
    grp = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    hyp_len = index.lengths[seq]

    # closest other length per member: sort members by (group, length); the candidates are the
    # neighbours in that order within the same group; nltk picks min (|r - h|, r)
    order = np.lexsort((hyp_len, grp))
    sl, sg = hyp_len[order], grp[order]
    big = int(sl.max(initial=0)) + 1
    inf = np.iinfo(np.int64).max
    score = np.full((2, len(order)), inf, dtype=np.int64)
    same = sg[1:] == sg[:-1]
    # left neighbour of sorted position p is p - 1, right neighbour p + 1
    score[0, 1:] = np.where(same, np.abs(sl[:-1] - sl[1:]) * big + sl[:-1], inf)
    score[1, :-1] = np.where(same, np.abs(sl[1:] - sl[:-1]) * big + sl[1:], inf)
    closest = np.empty(len(order), dtype=np.int64)
    closest[order] = score.min(axis=0) % big

    nums = []
    for n in range(1, max_n + 1):
        k, gram, count = index.gather(n, seq)
        # entries sorted by (group, n-gram), the largest count first
        key = grp[k] * max(1, index.n_grams[n]) + gram
        o = np.lexsort((-count, key))
        sk, sc, pos = key[o], count[o], k[o]
        first = np.ones(len(sk), dtype=bool)
        first[1:] = sk[1:] != sk[:-1]
        starts = np.nonzero(first)[0]
        seg = np.cumsum(first) - 1
        m1 = sc[starts]
        has_second = np.append(starts[1:], len(sk)) - starts >= 2
        m2 = np.where(has_second, sc[np.minimum(starts + 1, len(sk) - 1)], 0)
        clipped = np.where(sc < m1[seg], sc, m2[seg])
        nums.append(np.bincount(pos, weights=clipped, minlength=len(seq)).astype(np.float64))
    return _combine(hyp_len, closest, nums, weights, epsilon)


def nltk_sentence_bleu(hyp_tokens: list[str], ref_tokens: list[list[str]], epsilon: float = EPSILON) -> float:
    """The reference implementation (nltk), used by tests and the benchmark."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return float(
        sentence_bleu(ref_tokens, hyp_tokens, weights=WEIGHTS, smoothing_function=SmoothingFunction(epsilon=epsilon).method1)
    )


def self_bleu_groups(token_lists: Sequence[Sequence[str]], groups: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """For each group of text indices: BLEU of every member against the other members."""
    vals = self_bleu_jobs(NgramIndex(token_lists, max_n=4), groups)
    out, pos = [], 0
    for grp in groups:
        out.append(vals[pos : pos + len(grp)])
        pos += len(grp)
    return out


__all__ = ["bleu_jobs", "nltk_sentence_bleu", "self_bleu_groups", "self_bleu_jobs", "ranges"]
