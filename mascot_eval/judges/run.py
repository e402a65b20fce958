"""Judge every transcript in a run directory with a panel of judges; resumable.

A *unit* is one judging call: (dialogue, judge, level, agent). Units whose rows are all in
``judgments.jsonl`` with the same spec and template hashes are skipped on a rerun; units that
ended in ``call_failed`` are retried; changing a judge's spec, rubric or template re-judges (the
newest rows win when read back with :func:`latest_judgments`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from ..aio import run_all, run_sync
from ..backends.client import ClientSettings
from ..criteria import criteria_for
from ..errors import UserError
from ..records.judgment import latest_rows
from ..runs.rundir import RunDir
from ..transcript import Transcript
from .score import Judge, judge_units, units_for
from .specs import JudgeSpec, parse_judges


def _now() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


@dataclass
class JudgeResult:
    new_units: int = 0
    reused_units: int = 0
    unscored_units: int = 0  # of the new units: the reply could not be parsed (or was degenerate)
    failed_units: int = 0  # of the new units: the call failed for good (retried on the next resume)
    new_rows: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)  # the first failed calls: {id, error}
    seconds: float = 0.0
    per_judge: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


latest_judgments = latest_rows


def _done_units(rows: list[dict[str, Any]]) -> set[tuple]:
    counts: Counter[tuple] = Counter()
    for r in latest_rows(rows):
        if r.get("status") == "call_failed":
            continue
        counts[(r["dialogue_id"], r["judge"], r["level"], r.get("agent"), r.get("spec_hash"), r.get("template_hash"))] += 1
    return {k for k, n in counts.items() if n == len(criteria_for(k[2]))}


def _levels_for(t: Transcript, levels: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    if levels:
        return tuple(levels)
    return ("agent", "group")


async def judge_rundir_async(
    rundir: RunDir,
    judges: list[str] | list[JudgeSpec] | list[Judge] | str,
    *,
    settings: ClientSettings | None = None,
    levels: tuple[str, ...] | list[str] | None = None,
    progress: bool = True,
    transcripts: list[Transcript] | None = None,
    max_parallel_dialogues: int = 16,
    cards: list | dict | None = None,
) -> JudgeResult:
    """``cards``: the persona cards to show (None: each transcript's persona group; {} for none, e.g.
    human dialogues)."""
    for lv in levels or ():
        criteria_for(lv) if lv in ("agent", "group") else _bad_level(lv)
    if isinstance(judges, list) and judges and all(isinstance(j, Judge) for j in judges):
        panel = cast("list[Judge]", list(judges))  # already loaded (the CLI loads them before anything is written)
    else:
        # a list holds names or specs, told apart by its first item
        specs = (
            parse_judges(judges)
            if isinstance(judges, str) or (judges and isinstance(judges[0], str))
            else cast("list[JudgeSpec]", list(judges))
        )
        panel = [Judge(s, settings) for s in specs]
    ts = transcripts if transcripts is not None else rundir.transcripts()
    if not ts:
        raise UserError(f"{rundir.transcripts_path}: no transcripts to judge; run `mascot-eval generate` first")
    standalone = not rundir.locked  # not a step of `run`, which already started the run's ledger
    with rundir.lock():
        if standalone:
            from ..backends.usage import begin_run

            begin_run(float(rundir.read_manifest().get("cost_usd") or 0.0))
        return await _judge_locked(rundir, panel, ts, levels, progress, max_parallel_dialogues, cards)


async def _judge_locked(
    rundir: RunDir,
    panel: list[Judge],
    ts: list[Transcript],
    levels: Any,
    progress: bool,
    max_parallel_dialogues: int,
    cards: list | dict | None = None,
) -> JudgeResult:
    from ..records.manifest import StepRecord
    from ..runs.ledger import record_ledger

    started = _now()
    rundir.update_manifest(
        judges={
            j.spec.name: {
                "model": j.spec.model,
                "spec_hash": j.spec_hash,
                "template_hash": j.template_hash,
                "file": j.spec.file,
                "rubrics": _rubric_hashes(j.spec),
            }
            for j in panel
        }
    )
    done = _done_units(list(rundir.judgments()))
    result = JudgeResult()
    jobs: list[tuple[Judge, Transcript, list[tuple[str, str | None]]]] = []
    for j in panel:
        stats = result.per_judge.setdefault(
            j.spec.name, {"new_units": 0, "reused_units": 0, "unscored_units": 0, "failed_units": 0}
        )
        for t in ts:
            todo = []
            for level, agent in units_for(t, _levels_for(t, levels)):
                if (t.dialogue_id, j.spec.name, level, agent, j.spec_hash, j.template_hash) in done:
                    result.reused_units += 1
                    stats["reused_units"] += 1
                else:
                    todo.append((level, agent))
            if todo:
                jobs.append((j, t, todo))
    total = sum(len(u) for _, _, u in jobs)
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(max_parallel_dialogues)
    finished = 0

    def record(j: Judge, t: Transcript, rows: list[dict[str, Any]]) -> None:
        """Write one unit's rows the moment its call finished (a stop never loses a paid answer)."""
        nonlocal finished
        stats = result.per_judge[j.spec.name]
        for r in rows:
            rundir.append_judgment(r)
        result.new_rows += len(rows)
        result.new_units += 1
        stats["new_units"] += 1
        status = rows[0]["status"] if rows else "scored"
        if status == "call_failed":
            result.failed_units += 1
            stats["failed_units"] += 1
            if len(result.failures) < 20:
                result.failures.append(
                    {
                        "id": f"{t.dialogue_id}|{j.spec.name}|{rows[0]['level']}|{rows[0]['agent'] or '-'}",
                        "error": rows[0]["reason"],
                    }
                )
        elif status != "scored":
            result.unscored_units += 1
            stats["unscored_units"] += 1
        finished += 1
        if progress:
            print(f"\rjudging: {finished}/{total} calls", end="", file=sys.stderr, flush=True)

    async def run_job(j: Judge, t: Transcript, todo: list[tuple[str, str | None]]) -> None:
        async with sem:
            await judge_units(j, t, todo, cards, on_unit=lambda rows: record(j, t, rows))

    status = "done"
    try:
        await run_all(run_job(*job) for job in jobs)
    except BaseException:
        status = "stopped"
        raise
    finally:
        result.seconds = time.perf_counter() - t0
        if progress and total:
            print(file=sys.stderr)
        if status == "done" and result.failed_units:
            status = "done_with_failures"
        rundir.update_manifest(
            steps={
                "judge": StepRecord(
                    status=status,
                    started=started,
                    ended=_now(),
                    seconds=round(result.seconds, 3),
                    counts={
                        "new_units": result.new_units,
                        "reused_units": result.reused_units,
                        "unscored_units": result.unscored_units,
                        "failed_units": result.failed_units,
                        "per_judge": result.per_judge,
                    },
                    failures=result.failures,
                ).model_dump()
            }
        )
        record_ledger(rundir)
    return result


def _rubric_hashes(spec: JudgeSpec) -> dict[str, str | None]:
    """level -> sha256 (16 hex) of the rubric file the judge uses, for `regress` to compare rubric versions."""
    from ..fileio import sha256_file
    from .rubrics import rubric_path

    out: dict[str, str | None] = {}
    for level, fname in sorted(spec.rubrics.items()):
        p = rubric_path(spec.judges_root, fname, where=spec.file or f"judge '{spec.name}'", field=f"rubrics.{level}")
        out[level] = sha256_file(p)[:16] if p.is_file() else None
    return out


def _bad_level(lv: str) -> None:
    raise UserError(f"--levels: unknown level '{lv}'; use agent, group or both")


def judge_rundir(
    rundir: RunDir,
    judges: list[str] | list[JudgeSpec] | list[Judge] | str,
    *,
    settings: ClientSettings | None = None,
    levels: tuple[str, ...] | list[str] | None = None,
    progress: bool = True,
) -> JudgeResult:
    """Judge all transcripts of ``rundir`` with ``judges``; appends to judgments.jsonl; resumable."""
    return run_sync(judge_rundir_async(rundir, judges, settings=settings, levels=levels, progress=progress))
