"""The run's usage ledger, computed from the rows each step wrote (never from process counters).

Every model call a run paid for sits in exactly one row: a transcript's ``calls``, a failed attempt
in ``failures.jsonl``, the first criterion row of a judging unit, a comparison row. Adding those up
per step gives the manifest's ``usage`` and ``cost_usd``, so the manifest total equals the sum of
the rows' costs, survives resumes, and counts superseded rows too (a re-judged unit was paid twice).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from ..records.usage import Usage, UsageLedger, round_cost
from .rundir import RunDir

STEPS = ("generate", "judge", "compare")


def _generate_items(rd: RunDir) -> Iterator[tuple[str, str, Usage]]:
    for t in rd.transcripts(all_lines=True):
        for c in t.calls:
            yield c.tag, c.spec, c.usage
    for f in rd.failures():
        if f.get("step") == "generate":
            for c in f.get("calls") or []:
                yield str(c.get("tag", "")), str(c.get("spec", "")), Usage.model_validate(c.get("usage") or {})


def _judge_items(rd: RunDir) -> Iterator[tuple[str, str, Usage]]:
    for r in rd.judgments():
        if r.get("usage"):
            yield f"judge:{r['judge']}", str(r.get("judge_model") or ""), Usage.model_validate(r["usage"])


def _compare_items(rd: RunDir) -> Iterator[tuple[str, str, Usage]]:
    for r in rd.comparisons():
        yield f"judge:{r['judge']}:threeway", str(r.get("judge_model") or ""), Usage.model_validate(r.get("usage") or {})


ITEMS = {"generate": _generate_items, "judge": _judge_items, "compare": _compare_items}


def run_ledger(rd: RunDir) -> tuple[dict[str, UsageLedger], float]:
    """Per-step ledgers and the run's total dollars (an exact sum over every row of every step)."""
    ledgers: dict[str, UsageLedger] = {}
    costs: list[float] = []
    for step in STEPS:
        items = list(ITEMS[step](rd))
        if items:
            ledgers[step] = UsageLedger.of(items)
            costs.extend(u.cost_usd for _, _, u in items)
    return ledgers, round_cost(math.fsum(costs))


def record_ledger(rd: RunDir) -> float:
    """Write the ledger into the manifest (``usage``, ``cost_usd``); returns the total dollars."""
    ledgers, total = run_ledger(rd)
    rd.update_manifest(usage={k: v.model_dump(mode="json") for k, v in ledgers.items()}, cost_usd=total)
    return total
