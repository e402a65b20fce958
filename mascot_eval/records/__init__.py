"""Typed, versioned records for every artifact a run writes, one module per record.

Each stage reads only the previous stage's artifacts through these types:
task -> :class:`Transcript` -> :class:`JudgmentRow` / :class:`ComparisonRow` / :class:`MetricRow`
-> :class:`Summary` -> report; :class:`Manifest` records provenance, status and the usage ledger.
``mascot-eval schema`` exports their JSON Schemas.
"""

from __future__ import annotations

from typing import Any

from .base import Record
from .comparison import ComparisonRow
from .judgment import JudgmentRow
from .manifest import Invocation, Manifest, StepRecord
from .metric import MetricRow
from .summary import Summary
from .transcript import AgentInfo, PlayedPersona, SystemInfo, Transcript, Turn
from .usage import CallRecord, Usage, UsageLedger

# name (as `mascot-eval schema NAME` takes it) -> (record type, schema id)
RECORDS: dict[str, tuple[type[Record], str]] = {
    "transcript": (Transcript, "mascot-transcript/2"),
    "judgment": (JudgmentRow, "mascot-judgment/2"),
    "comparison": (ComparisonRow, "mascot-comparison/2"),
    "metric": (MetricRow, "mascot-metric/1"),
    "summary": (Summary, "mascot-summary/2"),
    "manifest": (Manifest, "mascot-run/2"),
}


def json_schema(name: str) -> dict[str, Any]:
    cls, schema_id = RECORDS[name]
    out = cls.model_json_schema(by_alias=True)
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$id"] = schema_id
    out.setdefault("description", (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else schema_id)
    return out


__all__ = [
    "AgentInfo",
    "CallRecord",
    "ComparisonRow",
    "Invocation",
    "JudgmentRow",
    "Manifest",
    "MetricRow",
    "PlayedPersona",
    "RECORDS",
    "Record",
    "StepRecord",
    "Summary",
    "SystemInfo",
    "Transcript",
    "Turn",
    "Usage",
    "UsageLedger",
    "json_schema",
]
