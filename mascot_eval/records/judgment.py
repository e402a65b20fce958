"""The judgment row (``judgments.jsonl``, schema ``mascot-judgment/2``): one judge score of one criterion.

A *unit* is one judging call (with its re-asks): (dialogue, judge, level, agent). It writes one row
per criterion of its rubric, in rubric order; ``criterion_index`` 0 carries the unit's ``usage``
(the others carry none), so the rows of a file add up to what the judge step cost.

``status``: ``scored`` (``score`` is 1-5), ``unscored`` (the reply could not be parsed, or the
verdict was degenerate; ``reason`` says why) or ``call_failed`` (the call failed for good; retried
on the next resume). Neither of the last two is ever a score.
"""

from __future__ import annotations

from typing import Any, Literal, Final

from pydantic import Field

from ..errors import UserError
from .base import Record
from .usage import Usage

SCHEMA: Final = "mascot-judgment/2"
OLD_SCHEMAS = ("mascot-judgment/1",)
Status = Literal["scored", "unscored", "call_failed"]
ROW_KEY = ("dialogue_id", "judge", "level", "agent", "criterion")


class JudgmentRow(Record):
    """One judge score of one criterion of one unit (a judging call)."""

    schema_: Literal["mascot-judgment/2"] = Field(default=SCHEMA, alias="schema")
    dialogue_id: str
    pair_key: str
    system: str
    task: str
    split: str
    domain: str = ""
    context_id: str
    judge: str
    judge_model: str
    level: Literal["agent", "group"]
    agent: str | None = None  # the judged agent (agent level); None for the group level
    round: int | None = None  # set when a judge scores one round rather than the whole dialogue
    criterion: str
    criterion_index: int = 0
    score: float | None = None  # 1-5 when scored
    score_100: float | None = None  # (score - 1) / 4 * 100
    weighted_score: float | None = None  # probability-weighted 1-5 where log-probabilities exist
    status: Status
    reason: str | None = None
    rationale: str | None = None
    usage: Usage | None = None  # on criterion_index 0 only: the unit's calls
    call_id: str | None = None
    spec_hash: str | None = None
    template_hash: str | None = None
    source: str | None = None  # where imported ratings came from (human sheets)

    @property
    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in ROW_KEY)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "judgment") -> JudgmentRow:
        if isinstance(d, dict) and d.get("schema") in OLD_SCHEMAS:
            d = upgrade_v1(d)
        elif isinstance(d, dict) and d.get("schema") != SCHEMA:
            raise UserError(f"{where}: schema is {d.get('schema')!r}, expected {SCHEMA!r}; re-judge with this version")
        return cls.load(d, where=where)


def upgrade_v1(d: dict[str, Any]) -> dict[str, Any]:
    """Version 1 rows: call failures were ``unscored`` with reason ``call_failed: ...``; every row of a
    unit carried the unit's usage (it is kept on the first criterion only)."""
    d = {**d, "schema": SCHEMA}
    if d.get("status") == "unscored" and str(d.get("reason") or "").startswith("call_failed"):
        d["status"] = "call_failed"
    u = d.get("usage")
    d["usage"] = {k: v for k, v in u.items() if k in Usage.model_fields} if isinstance(u, dict) and u else None
    from ..criteria import criteria_for

    try:
        d["criterion_index"] = criteria_for(d.get("level", "")).index(d.get("criterion"))
    except ValueError:
        d["criterion_index"] = 0
    if d["criterion_index"] != 0:
        d["usage"] = None
    return d


def latest_rows(rows: Any) -> list[dict[str, Any]]:
    """One row per (dialogue, judge, level, agent, criterion): the last one written wins (a rerun after a
    judge's spec or template changed appends fresh rows; a retried failed call supersedes its failure)."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        out[tuple(r.get(k) for k in ROW_KEY)] = r
    return list(out.values())
