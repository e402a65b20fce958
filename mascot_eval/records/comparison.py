"""The three-way comparison row (``comparisons.jsonl``, schema ``mascot-comparison/2``): one judge call
that saw three systems' dialogues of one context, anonymised as A, B, C in ``order``."""

from __future__ import annotations

from typing import Any, Literal, Final

from pydantic import Field

from ..errors import UserError
from .base import Record
from .usage import Usage

SCHEMA: Final = "mascot-comparison/2"
OLD_SCHEMAS = ("mascot-comparison/1",)


class ComparisonRow(Record):
    """One three-way comparison call: the order shown, the pick mapped back to a system, the rationale."""

    schema_: Literal["mascot-comparison/2"] = Field(default=SCHEMA, alias="schema")
    pair_key: str
    task: str
    split: str
    domain: str = ""
    context_id: str
    judge: str
    judge_model: str
    systems: list[str]  # the three systems, sorted
    order: list[str]  # the systems as shown: order[i] was labelled A, B, C
    order_index: int
    dialogue_ids: list[str]
    status: Literal["scored", "unscored", "call_failed"]
    reason: str | None = None
    rationale: str | None = None
    usage: Usage = Field(default_factory=Usage)
    call_id: str | None = None
    spec_hash: str | None = None
    template_hash: str | None = None
    best_label: str | None = None  # "A" / "B" / "C" / "tie"
    best_position: int | None = None  # 1-3
    best_system: str | None = None
    tie: bool | None = None
    ranking_systems: list[str] | None = None
    probs: dict[str, float] | None = None  # logprob judges: the label probabilities

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "comparison") -> ComparisonRow:
        if isinstance(d, dict) and d.get("schema") in OLD_SCHEMAS:
            d = {**d, "schema": SCHEMA}
            if d.get("status") == "unscored" and str(d.get("reason") or "").startswith("call_failed"):
                d["status"] = "call_failed"
            if isinstance(d.get("usage"), dict):
                d["usage"] = {k: v for k, v in d["usage"].items() if k in Usage.model_fields}
        elif isinstance(d, dict) and d.get("schema") != SCHEMA:
            raise UserError(f"{where}: schema is {d.get('schema')!r}, expected {SCHEMA!r}; re-run the comparison")
        return cls.load(d, where=where)
