"""ROUGE-L F-measure with rouge-score's tokenizer and scoring, and a bit-parallel LCS.

Values equal ``rouge_score.rouge_scorer.RougeScorer(["rougeL"]).score(a, b)["rougeL"].fmeasure``
(checked token-for-token and value-for-value in the tests): rouge-score's default tokenizer
(lower-case, non-alphanumerics -> spaces, no stemming), LCS-precision = LCS / len(prediction),
LCS-recall = LCS / len(target), F = 2PR / (P + R) and 0 when either text has no token. F is
symmetric, so the order of the two texts does not matter.

rouge-score fills an O(m*n) Python table per pair; here each text is tokenised once and the LCS
length is computed with the bit-parallel algorithm of Hyyrö (2004) on Python integers, O(n) big-int
operations per pair, which makes corpus-scale pairwise ROUGE-L cheap.
"""

from __future__ import annotations


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists (bit-parallel)."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    return _lcs_masks(masks, len(a), b)


def _lcs_masks(masks: dict[str, int], n: int, b: list[str]) -> int:
    full = (1 << n) - 1
    v = full
    for tok in b:
        m = masks.get(tok)
        if m is None:
            continue
        u = v & m
        v = ((v + u) | (v - u)) & full
    return n - bin(v).count("1")


class RougeL:
    """``rouge(a, b)`` -> ROUGE-L F-measure; tokens and bit masks of each text are cached."""

    def __init__(self) -> None:
        # imported here: rouge-score imports nltk (and with it scipy.stats), seconds a resumed run
        # that computes no metric should not pay
        from rouge_score import scoring, tokenizers

        self._tok = tokenizers.DefaultTokenizer(use_stemmer=False)
        self._fmeasure = scoring.fmeasure
        self._cache: dict[str, tuple[list[str], dict[str, int]]] = {}

    def _get(self, text: str) -> tuple[list[str], dict[str, int]]:
        hit = self._cache.get(text)
        if hit is None:
            toks = self._tok.tokenize(text)
            masks: dict[str, int] = {}
            for i, t in enumerate(toks):
                masks[t] = masks.get(t, 0) | (1 << i)
            hit = (toks, masks)
            self._cache[text] = hit
        return hit

    def __call__(self, target: str, prediction: str) -> float:
        t_toks, t_masks = self._get(target)
        p_toks, _ = self._get(prediction)
        if not t_toks or not p_toks:
            return 0.0
        lcs = _lcs_masks(t_masks, len(t_toks), p_toks)
        precision = lcs / len(p_toks)
        recall = lcs / len(t_toks)
        return float(self._fmeasure(precision, recall))
