"""Shared, vectorised n-gram counting.

:class:`NgramIndex` maps every n-gram (n = 1..max_n) of a list of token sequences to a dense
integer id and stores, per sequence and order, the sorted (gram id, count) pairs in CSR form.
BLEU, distinct-n and entropy then work on integer arrays with numpy instead of Python Counters.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np
import pandas as pd


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for each (s, l), vectorised."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    offsets = np.repeat(np.asarray(starts, dtype=np.int64) - (ends - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)


def _dense_ids(key: np.ndarray) -> tuple[int, np.ndarray]:
    """(number of distinct keys, rank of each key among them): np.unique(return_inverse=True)
    with an unstable (faster) sort."""
    if not len(key):
        return 0, np.zeros(0, np.int64)
    order = np.argsort(key)
    sk = key[order]
    new = np.empty(len(sk), dtype=np.int64)
    new[0] = 0
    np.not_equal(sk[1:], sk[:-1], out=new[1:])
    ranks = np.cumsum(new)
    dense = np.empty(len(key), dtype=np.int64)
    dense[order] = ranks
    return int(ranks[-1]) + 1, dense


class NgramIndex:
    """n-gram counts of ``sequences`` (lists of tokens) for n = 1..max_n.

    For order n: ``indptr[n]`` (len = number of sequences + 1), ``grams[n]`` and ``counts[n]``:
    the n-grams of sequence i are ``grams[n][indptr[n][i]:indptr[n][i+1]]`` (sorted, distinct)
    with their counts. ``lengths[i]`` is the number of tokens of sequence i.
    """

    def __init__(self, sequences: Sequence[Sequence[str]], max_n: int = 4) -> None:
        self.max_n = max_n
        self.n_seq = len(sequences)
        codes, uniq = pd.factorize(np.fromiter(chain.from_iterable(sequences), dtype=object))
        n_vocab = len(uniq)
        self.vocab_size = max(1, n_vocab)
        tok = codes.astype(np.int64, copy=False)
        self.lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=self.n_seq)
        starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]) if self.n_seq else np.zeros(0, np.int64)
        seq_of_pos = np.repeat(np.arange(self.n_seq, dtype=np.int64), self.lengths)
        pos_in_seq = np.arange(len(tok), dtype=np.int64) - np.repeat(starts, self.lengths)
        self.indptr: dict[int, np.ndarray] = {}
        self.grams: dict[int, np.ndarray] = {}
        self.counts: dict[int, np.ndarray] = {}
        self.n_grams: dict[int, int] = {}
        prev = tok.copy()  # dense id of the (n-1)-gram starting at each position
        for n in range(1, max_n + 1):
            valid = pos_in_seq <= (self.lengths[seq_of_pos] - n)
            idx = np.nonzero(valid)[0]
            if n == 1:  # token ids are already dense: 0..V-1, each occurring
                dense = tok[idx]
                g = n_vocab
            else:
                g, dense = _dense_ids(prev[idx] * self.vocab_size + tok[idx + n - 1])
            self.n_grams[n] = g
            new_prev = np.zeros(len(tok), dtype=np.int64)
            new_prev[idx] = dense
            prev = new_prev
            # per-sequence (gram, count), sorted by sequence then gram
            pair = seq_of_pos[idx] * max(1, g) + dense
            upair, cnt = np.unique(pair, return_counts=True)
            seq = upair // max(1, g)
            self.grams[n] = upair % max(1, g)
            self.counts[n] = cnt.astype(np.int64)
            self.indptr[n] = np.searchsorted(seq, np.arange(self.n_seq + 1), side="left").astype(np.int64)

    def gather(self, n: int, seq_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each position k of ``seq_ids``: the n-gram entries of that sequence.

        Returns ``(k, gram, count)`` arrays (k is the position in ``seq_ids``, non-decreasing).
        """
        seq_ids = np.asarray(seq_ids, dtype=np.int64)
        ip = self.indptr[n]
        starts = ip[seq_ids]
        lens = ip[seq_ids + 1] - starts
        idx = ranges(starts, lens)
        k = np.repeat(np.arange(len(seq_ids), dtype=np.int64), lens)
        return k, self.grams[n][idx], self.counts[n][idx]

    def matrix(self, n: int, extra_rows: int = 0):  # type: ignore[no-untyped-def]
        """The counts of order n as a scipy CSR matrix (texts x n-grams, sorted indices), with
        ``extra_rows`` empty rows appended."""
        import scipy.sparse as sp

        ip = self.indptr[n]
        if extra_rows:
            ip = np.concatenate([ip, np.full(extra_rows, ip[-1], dtype=ip.dtype)])
        # int32 throughout when it fits: scipy then neither converts nor copies, and its merges run faster
        small = len(self.grams[n]) < 2**31 - 1 and self.n_grams[n] < 2**31 - 1
        dt = np.int32 if small else np.int64
        counts = self.counts[n]
        if small and counts.max(initial=0) < 2**31 - 1:
            counts = counts.astype(np.int32)
        m = sp.csr_matrix(
            (counts, self.grams[n].astype(dt, copy=False), ip.astype(dt, copy=False)),
            shape=(self.n_seq + extra_rows, max(1, self.n_grams[n])),
            copy=False,
        )
        m.has_sorted_indices = True
        m.has_canonical_format = True
        return m

    def ngram_totals(self, n: int) -> np.ndarray:
        """Number of n-grams (with repetition) per sequence: max(0, len - n + 1)."""
        return np.maximum(0, self.lengths - n + 1)


def distinct_and_entropy(
    index: NgramIndex, n: int, seq_ids: np.ndarray, set_ids: np.ndarray, n_sets: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per set: (distinct-n, entropy-n in bits, total n-grams), pooling the sequences of each set.

    ``seq_ids[k]`` belongs to set ``set_ids[k]`` (a sequence may appear several times, e.g. the
    same text spoken twice; each occurrence counts). Sets without n-grams get NaN.
    """
    k, gram, count = index.gather(n, seq_ids)
    sets = np.asarray(set_ids, dtype=np.int64)[k]
    g = max(1, index.n_grams[n])
    key = sets * g + gram
    ukey, inv = np.unique(key, return_inverse=True)
    c = np.bincount(inv, weights=count, minlength=len(ukey))
    uset = ukey // g
    total = np.bincount(uset, weights=c, minlength=n_sets)
    distinct_count = np.bincount(uset, minlength=n_sets).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        distinct = distinct_count / total
        p = c / total[uset]
        ent = -np.bincount(uset, weights=p * np.log2(p), minlength=n_sets)
    distinct[total == 0] = np.nan
    ent[total == 0] = np.nan
    ent = np.where(ent == 0, 0.0, ent)  # no negative zero
    return distinct, ent, total
