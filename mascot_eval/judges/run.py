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
from typing import Any

from ..aio import run_all
from ..backends.client import ClientSettings
from ..criteria import criteria_for
from ..errors import UserError
from ..runs.rundir import RunDir
from ..transcript import Transcript
from .score import Judge, judge_units, units_for
from .specs import JudgeSpec, parse_judges

ROW_KEY = ("dialogue_id", "judge", "level", "agent", "criterion")


@dataclass
class JudgeResult:
    new_units: int = 0
    reused_units: int = 0
    unscored_units: int = 0  # of the new units
    new_rows: int = 0
    seconds: float = 0.0
    per_judge: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def latest_judgments(rows: list[dict[str, Any]] | Any) -> list[dict[str, Any]]:
    """One row per (dialogue, judge, level, agent, criterion): the last one written."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        out[tuple(r.get(k) for k in ROW_KEY)] = r
    return list(out.values())


def _done_units(rows: list[dict[str, Any]]) -> set[tuple]:
    counts: Counter[tuple] = Counter()
    for r in latest_judgments(rows):
        if (r.get("reason") or "").startswith("call_failed"):
            continue
        counts[(r["dialogue_id"], r["judge"], r["level"], r.get("agent"), r.get("spec_hash"), r.get("template_hash"))] += 1
    return {k for k, n in counts.items() if n == len(criteria_for(k[2]))}


def repair_tail(path) -> bool:
    """Drop a last line cut short by a kill, so the next append starts on a fresh line."""
    from pathlib import Path

    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return False
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return False
    cut = data.rfind(b"\n") + 1
    with open(path, "r+b") as fh:
        fh.truncate(cut)
    return True


def _levels_for(t: Transcript, levels: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    if levels:
        return tuple(levels)
    return ("agent", "group")


async def judge_rundir_async(
    rundir: RunDir,
    judges: list[str] | list[JudgeSpec] | str,
    *,
    settings: ClientSettings | None = None,
    levels: tuple[str, ...] | list[str] | None = None,
    progress: bool = True,
    transcripts: list[Transcript] | None = None,
    max_parallel_dialogues: int = 16,
) -> JudgeResult:
    specs = parse_judges(judges) if isinstance(judges, str) or (judges and isinstance(judges[0], str)) else list(judges)
    for lv in levels or ():
        criteria_for(lv) if lv in ("agent", "group") else _bad_level(lv)
    panel = [Judge(s, settings) for s in specs]
    ts = transcripts if transcripts is not None else rundir.transcripts()
    if not ts:
        raise UserError(f"{rundir.transcripts_path}: no transcripts to judge; run `mascot-eval generate` first")
    rundir.update_manifest(
        judges={
            j.spec.name: {"model": j.spec.model, "spec_hash": j.spec_hash, "template_hash": j.template_hash, "file": j.spec.file,
                          "rubrics": _rubric_hashes(j.spec)}
            for j in panel
        }
    )
    repair_tail(rundir.judgments_path)
    done = _done_units(list(rundir.judgments()))
    result = JudgeResult()
    jobs: list[tuple[Judge, Transcript, list[tuple[str, str | None]]]] = []
    for j in panel:
        stats = result.per_judge.setdefault(j.spec.name, {"new_units": 0, "reused_units": 0, "unscored_units": 0})
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

    async def run_job(j: Judge, t: Transcript, todo: list[tuple[str, str | None]]) -> None:
        nonlocal finished
        async with sem:
            groups = await judge_units(j, t, todo)
        stats = result.per_judge[j.spec.name]
        for rows in groups:
            for r in rows:
                rundir.append_judgment(r)
            result.new_rows += len(rows)
            result.new_units += 1
            stats["new_units"] += 1
            if rows and rows[0]["status"] != "scored":
                result.unscored_units += 1
                stats["unscored_units"] += 1
        finished += len(groups)
        if progress:
            print(f"\rjudging: {finished}/{total} calls", end="", file=sys.stderr, flush=True)

    try:
        await run_all(run_job(*job) for job in jobs)
    finally:
        result.seconds = time.perf_counter() - t0
        if progress and total:
            print(file=sys.stderr)
    return result


def _rubric_hashes(spec: JudgeSpec) -> dict[str, str | None]:
    """level -> sha256 (16 hex) of the rubric file the judge uses, for `regress` to compare rubric versions."""
    from ..fileio import sha256_file

    out: dict[str, str | None] = {}
    for level, fname in sorted(spec.rubrics.items()):
        p = spec.judges_root / "rubrics" / fname
        out[level] = sha256_file(p)[:16] if p.is_file() else None
    return out


def _bad_level(lv: str) -> None:
    raise UserError(f"--levels: unknown level '{lv}'; use agent, group or both")


def judge_rundir(
    rundir: RunDir,
    judges: list[str] | list[JudgeSpec] | str,
    *,
    settings: ClientSettings | None = None,
    levels: tuple[str, ...] | list[str] | None = None,
    progress: bool = True,
) -> JudgeResult:
    """Judge all transcripts of ``rundir`` with ``judges``; appends to judgments.jsonl; resumable."""
    return run_sync(judge_rundir_async(rundir, judges, settings=settings, levels=levels, progress=progress))


def run_sync(coro):
    """Run a coroutine in a fresh event loop and close the model clients' sessions afterwards."""
    from ..backends.client import close_clients

    async def main():
        try:
            return await coro
        finally:
            await close_clients()

    return asyncio.run(main())
