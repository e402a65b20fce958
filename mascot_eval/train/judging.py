"""Stage 1: score every candidate with the judge on the five agent criteria; aggregate = their mean.

A candidate whose scores the judge did not give (unparsable output, failed call) is recorded as
``unscored`` with its reason and left out of the pairs; it is never a zero. ``judged.jsonl`` gets one
line per candidate; a rerun judges only the candidates without a line.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ..backends.client import ClientSettings
from ..criteria import AGENT_CRITERIA
from ..judges.specs import JudgeSpec
from ..fileio import append_jsonl, read_jsonl
from ..personas import PersonaCard
from ..aio import run_sync


def criterion_value(row: dict[str, Any], mode: str) -> float | None:
    """A judgment row's value on 1-5 read the way :func:`~mascot_eval.judges.score.score_response` reads
    Stage-1 scores: the expected digit (``weighted_score``) for ``mode: logprob`` and ``rules`` judges, the
    integer score for generating judges; None when unscored. Stage 2 uses it, so both stages agree."""
    if row.get("status", "scored") != "scored" or row.get("score") is None:
        return None
    if mode != "generate" and row.get("weighted_score") is not None:
        return float(row["weighted_score"])
    return float(row["score"])


def aggregate(scores: dict[str, float | None]) -> float | None:
    """Unweighted mean of the five agent criteria; None unless all five are scored."""
    vals = [scores.get(c) for c in AGENT_CRITERIA]
    known = [v for v in vals if v is not None]
    if len(known) < len(vals):
        return None
    return sum(float(v) for v in known) / len(vals)


def judge_candidates(
    judge: str | JudgeSpec,
    candidates: list[dict[str, Any]],
    cards: dict[str, PersonaCard],
    out: Path,
    *,
    settings: ClientSettings | None = None,
) -> dict[str, int]:
    """Append a judged row per candidate not yet in ``out``; returns {new, reused, scored, unscored}.

    A judge with ``mode: logprob`` gives continuous expected digits (see :meth:`Judge.ask_logprob`)."""
    from ..judges.score import score_response

    done = {r["key"] for r in read_jsonl(out)}
    todo = [c for c in candidates if c["key"] not in done]
    counts = {"new": 0, "reused": len(done), "scored": 0, "unscored": 0}

    async def one(c: dict[str, Any]) -> None:
        card = cards[c["persona"]]
        try:
            scores = await score_response(judge, persona=card, history=c["history"], response=c["text"], settings=settings)
            reason = None if aggregate(scores) is not None else "judge output not parsed"
        except Exception as exc:
            from ..backends.base import BackendError

            if not isinstance(exc, BackendError):
                raise
            scores, reason = {k: None for k in AGENT_CRITERIA}, f"call_failed: {exc}"[:300]
        agg = aggregate(scores)
        row = {
            "key": c["key"],
            "task": c["task"],
            "context_id": c["context_id"],
            "state": c.get("state", ""),
            "persona": c["persona"],
            "k": c["k"],
            "judge": judge if isinstance(judge, str) else judge.name,
            "scores": scores,
            "aggregate": agg,
            "status": "scored" if agg is not None else "unscored",
            "reason": reason,
        }
        append_jsonl(out, row)
        counts["new"] += 1

    async def all_() -> None:
        await asyncio.gather(*(one(c) for c in todo))

    if todo:
        run_sync(all_())
    for r in read_jsonl(out):
        counts["scored" if r["status"] == "scored" else "unscored"] += 1
    return counts
