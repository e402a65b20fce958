"""The run manifest (``manifest.json``, schema ``mascot-run/2``): provenance, status and the usage ledger.

``status``: ``running`` while a command works on the run, then ``complete``,
``complete_with_failures`` (some model call failed for good in some step; rerun to retry),
``stopped`` (interrupted, a signal or a limit; rerun to resume) or ``failed`` (nothing finished).
``usage`` is the ledger per step (``generate``, ``judge``, ``compare``) computed from the rows the
step wrote (transcripts' calls, failed attempts in ``failures.jsonl``, judgment and comparison
rows), so ``cost_usd`` equals the sum of the rows' costs. ``steps`` holds what each step did last
(counts, seconds, failures, the content hash of its inputs).
"""

from __future__ import annotations

from typing import Any, Literal, Final

from pydantic import Field

from ..errors import UserError
from .base import Record
from .usage import UsageLedger

SCHEMA: Final = "mascot-run/2"
OLD_SCHEMAS = ("mascot-run/1",)
Status = Literal["running", "complete", "complete_with_failures", "stopped", "failed"]


class StepRecord(Record):
    status: str  # running / done / done_with_failures / stopped / skipped
    started: str | None = None
    ended: str | None = None
    seconds: float | None = None
    counts: dict[str, Any] = Field(default_factory=dict)
    failures: list[dict[str, Any]] = Field(default_factory=list)  # the first causes: {id, error}
    inputs_hash: str | None = None  # content hash of what the step read; equal hash -> skipped


class Invocation(Record):
    started: str
    ended: str | None = None
    command: list[str] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)
    pid: int | None = None
    status: Status | None = None
    steps: dict[str, StepRecord] = Field(default_factory=dict)


class Manifest(Record):
    """Provenance, status, per-step records and the usage ledger of a run directory."""

    schema_: Literal["mascot-run/2"] = Field(default=SCHEMA, alias="schema")
    run_id: str
    provenance: dict[str, Any] = Field(default_factory=dict)
    started: str | None = None
    ended: str | None = None
    status: Status | None = None
    invocations: list[Invocation] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)
    task_files: dict[str, Any] = Field(default_factory=dict)
    tasks: dict[str, Any] = Field(default_factory=dict)
    systems: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, Any] = Field(default_factory=dict)
    judges: dict[str, Any] = Field(default_factory=dict)
    comparisons: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    seeds: dict[str, Any] = Field(default_factory=dict)
    steps: dict[str, StepRecord] = Field(default_factory=dict)  # the latest record of each step
    usage: dict[str, UsageLedger] = Field(default_factory=dict)  # step -> ledger over the whole run
    cost_usd: float = 0.0
    # `judges validate` runs: the mapping and probe files (with hashes), sets, limits and command;
    # seconds per judge and set (for the evaluators table's seconds per 1,000)
    validation: dict[str, Any] | None = None
    validation_timing: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: Any, *, where: str = "manifest.json") -> Manifest:
        if isinstance(d, dict) and d.get("schema") in OLD_SCHEMAS:
            d = upgrade_v1(d)
        elif isinstance(d, dict) and d.get("schema") != SCHEMA:
            raise UserError(f"{where}: schema is {d.get('schema')!r}, expected {SCHEMA!r}; not a mascot-eval run manifest")
        return cls.load(d, where=where)


def upgrade_v1(d: dict[str, Any]) -> dict[str, Any]:
    """Version 1 kept per-step fields at the top level and a generate-only usage; keep what maps."""
    known = set(Manifest.model_fields) | {"schema"}
    out = {k: v for k, v in d.items() if k in known and k not in ("usage", "steps", "invocations", "metrics")}
    out["schema"] = SCHEMA
    out["invocations"] = [
        {k: v for k, v in inv.items() if k in ("started", "ended", "command", "settings", "status")}
        for inv in d.get("invocations", [])
        if isinstance(inv, dict) and "started" in inv
    ]
    if isinstance(d.get("metrics"), dict):
        out["metrics"] = d["metrics"]
    return out
