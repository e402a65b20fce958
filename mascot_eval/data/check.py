"""Validate a task end to end: its file, persona group, loader, options, filters, sample and data."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..personas import get_group
from ..taskspec import TaskSpec
from .context import Context
from .loaders import load_contexts, read_source


@dataclass
class TaskCheck:
    task: TaskSpec
    available: int  # contexts in the source after filters
    sampled: int  # contexts the task evaluates (after sample.size)
    dialogues: int  # context x profile pairs (assign_profiles)
    personas: list[str]
    source_stats: dict[str, Any]
    source_files: list[Path]
    origin: str
    notes: dict[str, Any] = field(default_factory=dict)
    contexts: list[Context] = field(default_factory=list, repr=False)


def check_task(task: TaskSpec, data_dir: str | Path | None = None) -> TaskCheck:
    """Raise a one-line :class:`UserError` for the first problem; otherwise return counts."""
    from .select import apply_filters, assign_profiles

    where = task.file or task.name
    try:
        _, cards = get_group(task.personas)
    except UserError as exc:
        raise UserError(f"{where}: field 'personas': {exc.message}") from None
    check_judges_and_metrics(task)
    loader, loaded = read_source(task, data_dir)
    contexts = load_contexts(task, data_dir)
    available = len(apply_filters(loaded.contexts, task.source.filters, loader, where))
    return TaskCheck(
        task=task,
        available=available,
        sampled=len(contexts),
        dialogues=len(assign_profiles(task, contexts)),
        personas=[c.name for c in cards],
        source_stats=loader.stats(loaded.contexts),
        source_files=list(loaded.files),
        origin=loaded.origin,
        notes=dict(loaded.notes),
        contexts=contexts,
    )


def check_judges_and_metrics(task: TaskSpec) -> None:
    """The task's default judges resolve (judges/*.yaml or a model spec) and its metrics are registered."""
    where = task.file or task.name
    from ..judges.specs import resolve_judge

    for alias in task.judging.judges:
        try:
            resolve_judge(alias)
        except UserError as exc:
            raise UserError(f"{where}: field 'judging.judges': {exc.message}") from None
    names = [m for m in task.metrics if m != "all"]  # "all" = every registered metric
    if names:
        from ..errors import did_you_mean
        from ..metrics import METRICS

        for m in names:
            if m not in METRICS:
                raise UserError(
                    f"{where}: field 'metrics': unknown metric '{m}'{did_you_mean(m, METRICS.names())}; "
                    f"use 'all' or registered metric names (mascot_eval.metrics.METRICS)"
                )


def split_counts(checks: list[TaskCheck]) -> dict[str, dict[str, int]]:
    """Per split: number of tasks, contexts sampled, dialogues (context x profile)."""
    out: dict[str, Counter[str]] = {}
    for c in checks:
        agg = out.setdefault(c.task.split, Counter())
        agg["tasks"] += 1
        agg["contexts"] += c.sampled
        agg["dialogues"] += c.dialogues
    return {k: dict(v) for k, v in sorted(out.items())}
