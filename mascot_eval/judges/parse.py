"""Read a judge's reply: the last valid JSON object wins; nothing copied from the data counts.

Accepted shapes: ``{"rationale": ..., "<criterion>": 1-5, ...}`` or with the scores nested under
``"scores"`` (values may be ``{"score": n}``). Fenced code blocks and text around the object are
fine. Objects inside an echoed ``<<<DATA ...>>>`` block, or that occur verbatim in the material
the judge was shown, are ignored: a transcript saying "give 5" in JSON cannot become a score.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..jsontext import json_objects

_ECHO = re.compile(r"<<<DATA id=([0-9a-f]+)>>>.*?(?:<<<END DATA id=\1>>>|\Z)", re.S)


@dataclass
class Parsed:
    ok: bool
    scores: dict[str, float] = field(default_factory=dict)
    rationale: str | None = None
    reason: str | None = None  # why not ok
    obj: dict[str, Any] | None = None
    span: tuple[int, int] | None = None  # where the chosen object sits in the reply
    key_positions: dict[str, int] = field(default_factory=dict)  # char offset of each score value


def _score_value(v: Any) -> float | None:
    if isinstance(v, dict) and "score" in v:
        v = v["score"]
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        v = v.strip()
        if not re.fullmatch(r"[1-5](\.0+)?", v):
            return None
        v = float(v)
    if isinstance(v, (int, float)) and not math.isnan(v) and float(v).is_integer() and 1 <= v <= 5:
        return float(v)
    return None


def _scores_of(obj: dict[str, Any], criteria: tuple[str, ...]) -> tuple[dict[str, float] | None, str]:
    nested = obj.get("scores")
    src: dict[str, Any] = nested if isinstance(nested, dict) else obj
    missing = [c for c in criteria if c not in src]
    if missing:
        return None, f"missing {', '.join(missing)}"
    scores: dict[str, float] = {}
    for c in criteria:
        s = _score_value(src[c])
        if s is None:
            return None, f"'{c}' is {json.dumps(src[c])[:40]}, not an integer 1-5"
        scores[c] = s
    return scores, ""


def _rationale(obj: dict[str, Any]) -> str | None:
    r = obj.get("rationale", obj.get("reasoning", obj.get("explanation")))
    return str(r)[:2000] if r is not None else None


def _mask_echo(text: str) -> str:
    """Blank out echoed data blocks, keeping offsets."""
    return _ECHO.sub(lambda m: " " * (m.end() - m.start()), text)


def _value_offsets(text: str, start: int, end: int, keys: tuple[str, ...]) -> dict[str, int]:
    seg = text[start:end]
    out: dict[str, int] = {}
    for k in keys:
        m = re.search(r'"' + re.escape(k) + r'"\s*:\s*(?:\{\s*"score"\s*:\s*)?"?([1-5])', seg)
        if m:
            out[k] = start + m.start(1)
    return out


def _candidates(text: str, shown: str) -> tuple[list[tuple[int, int, dict[str, Any]]], bool]:
    masked = _mask_echo(text)
    objs = json_objects(masked)
    echoed = False
    kept = []
    for s, e, obj in objs:
        raw = masked[s:e]
        if shown and len(raw) > 2 and raw in shown:
            echoed = True
            continue
        kept.append((s, e, obj))
    if not objs and masked != text and json_objects(text):
        echoed = True
    return kept, echoed


def parse_scores(text: str, criteria: tuple[str, ...], *, shown: str = "") -> Parsed:
    """Scores for ``criteria`` from the last valid JSON object in ``text``.

    ``shown`` is the prompt the judge saw; objects copied from it verbatim do not count.
    """
    if not text or not text.strip():
        return Parsed(False, reason="empty reply")
    objs, echoed = _candidates(text, shown)
    if not objs:
        return Parsed(False, reason="only JSON copied from the dialogue data" if echoed else "no JSON object in the reply")
    last_reason = ""
    for s, e, obj in reversed(objs):
        scores, why = _scores_of(obj, criteria)
        if scores is not None:
            return Parsed(True, scores, _rationale(obj), None, obj, (s, e), _value_offsets(text, s, e, criteria))
        last_reason = last_reason or why
    return Parsed(False, reason=f"no valid score object ({last_reason})")


def parse_choice(text: str, labels: tuple[str, ...], *, shown: str = "") -> Parsed:
    """A three-way verdict ``{"best": "A"|"B"|"C"|"tie", "ranking": [...]}`` from the last valid object.

    On success ``obj`` holds ``{"best": label or "tie", "ranking": [labels] or None}``.
    """
    if not text or not text.strip():
        return Parsed(False, reason="empty reply")
    objs, echoed = _candidates(text, shown)
    if not objs:
        return Parsed(False, reason="only JSON copied from the dialogue data" if echoed else "no JSON object in the reply")
    last_reason = ""
    for s, e, obj in reversed(objs):
        best = obj.get("best", obj.get("winner"))
        if not isinstance(best, str):
            last_reason = last_reason or "missing 'best'"
            continue
        b = best.strip().strip("\"'").removeprefix("Conversation ").strip()
        b = "tie" if b.lower() == "tie" else b.upper()
        if b != "tie" and b not in labels:
            last_reason = last_reason or f"'best' is {best!r}, not one of {', '.join(labels)} or tie"
            continue
        ranking = obj.get("ranking")
        rank: list[str] | None = None
        if isinstance(ranking, list):
            r = [str(x).strip().removeprefix("Conversation ").strip().upper() for x in ranking]
            if sorted(r) == sorted(labels) and (b == "tie" or r[0] == b):
                rank = r
        return Parsed(True, {}, _rationale(obj), None, {"best": b, "ranking": rank}, (s, e))
    return Parsed(False, reason=f"no valid verdict ({last_reason})")


def weighted_scores(
    text: str, top_logprobs: list[list[tuple[str, float]]] | None, positions: dict[str, int]
) -> dict[str, float | None]:
    """Probability-weighted 1-5 score per criterion from the token alternatives at the score digit.

    Tokens are aligned to ``text`` by taking, at each step, the alternative that continues the text
    (the generated token). Where alignment fails or no digit alternatives exist the value is None.
    """
    out: dict[str, float | None] = {k: None for k in positions}
    if not top_logprobs or not positions:
        return out
    starts: list[tuple[int, int]] = []  # (char offset, token index)
    off = 0
    for i, alts in enumerate(top_logprobs):
        rest = text[off:]
        chosen = None
        for tok, _lp in sorted(alts, key=lambda a: -a[1]):
            if tok and rest.startswith(tok):
                chosen = tok
                break
        if chosen is None:
            break  # alignment lost; positions after here stay unknown
        starts.append((off, i))
        off += len(chosen)
    for key, pos in positions.items():
        idx = None
        for o, i in starts:
            if o <= pos:
                idx = (o, i)
            else:
                break
        if idx is None:
            continue
        o, i = idx
        digit_in_token = pos - o
        num = den = 0.0
        for tok, lp in top_logprobs[i]:
            t = tok[digit_in_token:] if len(tok) > digit_in_token else ""
            t = t.strip()
            head = t[:1]
            if head in "12345" and head and (len(t) == 1 or not t[1].isdigit()) and tok[:digit_in_token] == text[o:pos]:
                p = math.exp(lp)
                num += p * int(head)
                den += p
        if den > 0:
            out[key] = num / den
    return out
