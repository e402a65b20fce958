"""Generate transcripts for tasks x systems into a run directory; reruns resume.

A dialogue is identified by ``<task>:<context>:<profile>:<system>``. Finished dialogues are
appended to ``transcripts.jsonl`` one complete line at a time; a rerun skips every dialogue whose
transcript is there (and refuses, with one line, when that transcript came from a different system
config, model, user simulator or seed). Dialogues run concurrently (asyncio); model calls go
through the shared client (cache, limits, usage), so the same seed and cached calls give the same
transcript.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends.client import ClientSettings
from ..data.context import Context
from ..errors import UserError
from ..fileio import read_jsonl, stable_hash
from ..runs.rundir import RunDir
from ..taskspec import TaskSpec
from ..transcript import make_dialogue_id
from .base import System, Tally
from .checkpoint import Checkpoint, load_checkpoint
from .engine import new_state, run_dialogue
from .factory import build_system
from .user_sim import USER_DECODING, SharedTurns, UserSimulator

Pair = tuple[Context, "str | None"]


@dataclass
class GenerateResult:
    new: int
    reused: int
    failed: int
    seconds: float
    failures: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


@dataclass
class _Job:
    task: TaskSpec
    context: Context
    profile: str | None
    system: System
    user: UserSimulator
    config_hash: str
    user_hash: str

    @property
    def dialogue_id(self) -> str:
        return make_dialogue_id(self.task.name, self.context.id, self.profile, self.system.config.name)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def load_pairs(task: TaskSpec, data_dir: str | Path | None, limit: int | None) -> list[Pair]:
    from ..data.loaders import load_contexts
    from ..data.select import assign_profiles

    contexts = load_contexts(task, Path(data_dir) if data_dir else None, limit=limit)
    return list(assign_profiles(task, contexts))


def repair_tail(path: Path) -> bool:
    """Drop a last line cut short by a kill, so the next append starts on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return False
        data = path.read_bytes()
        fh.truncate(data.rfind(b"\n") + 1)
        fh.flush()
        os.fsync(fh.fileno())
    return True


def _existing(rundir: RunDir) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(rundir.transcripts_path):
        if "dialogue_id" in row:
            out[row["dialogue_id"]] = row
    return out


def _plan(
    tasks: Sequence[TaskSpec], systems: Sequence[str], *, model: str, user_model: str, checkpoint: Checkpoint | None,
    limit: int | None, data_dir: str | Path | None, pairs: dict[str, list[Pair]] | None, personas_root: str | Path | None,
) -> tuple[list[_Job], dict[str, Any], dict[str, Any]]:
    jobs: list[_Job] = []
    sys_info: dict[str, Any] = {}
    task_info: dict[str, Any] = {}
    shared = SharedTurns()  # user openers: one call per context and profile, shared by every system
    for task in tasks:
        if pairs is not None and task.name in pairs:
            tp = list(pairs[task.name])[: limit if limit else None]
        else:
            tp = load_pairs(task, data_dir, limit)
        if not tp:
            raise UserError(
                f"task '{task.name}': no contexts to generate from (loader '{task.source.loader}', filters "
                f"{task.source.filters or '{}'}); check the filters, --limit and the data dir"
            )
        task_info[task.name] = {"version": task.version, "content_hash": task.content_hash, "split": task.split,
                                "domain": task.domain, "rounds": task.rounds, "contexts": len(tp), "file": task.file}
        for name in dict.fromkeys(systems):
            system = build_system(name, task, model=model, checkpoint=checkpoint, personas_root=personas_root)
            user = UserSimulator(task, user_model, agents=system.agents, shared=shared)
            # fail on a broken template before anything is written
            probe = new_state(task, tp[0][0], tp[0][1], system, seed=0)
            probe.round = 1
            user.preflight(probe)
            system.preflight(probe)
            chash = system.config_hash()
            uhash = stable_hash([user_model, user.template, user.template_hash(), USER_DECODING.model_dump()])
            info = sys_info.setdefault(system.config.name, {
                "kind": system.kind, "file": system.config.file, "checkpoint_parts": list(system.config.checkpoint),
                "config_hash": {}, "models": {}, "templates": {},
            })
            info["config_hash"][task.name] = chash
            info["models"][task.name] = system.models
            info["templates"] = {t: system.templates.hash(t) for t in system.used_templates()}
            jobs.extend(_Job(task, c, p, system, user, chash, uhash) for c, p in tp)
    unique = {j.dialogue_id: j for j in jobs}
    return list(unique.values()), sys_info, task_info


async def agenerate(
    rundir: RunDir,
    tasks: Sequence[TaskSpec],
    systems: Sequence[str],
    *,
    model: str = "embedded",
    checkpoint: str | None = None,
    limit: int | None = None,
    data_dir: str | Path | None = None,
    settings: ClientSettings | None = None,
    seed: int = 0,
    progress: bool = True,
    user_model: str | None = None,
    concurrency: int | None = None,
    pairs: dict[str, list[Pair]] | None = None,
    personas_root: str | Path | None = None,
) -> GenerateResult:
    t0 = time.perf_counter()
    if not tasks:
        raise UserError("no task given; pass --task NAME (see `mascot-eval tasks list`)")
    if not systems:
        raise UserError("no system given; pass --system NAME (see `mascot-eval systems list`)")
    user_model = user_model or model
    ckpt = load_checkpoint(checkpoint) if checkpoint else None
    jobs, sys_info, task_info = _plan(
        tasks, systems, model=model, user_model=user_model, checkpoint=ckpt, limit=limit, data_dir=data_dir,
        pairs=pairs, personas_root=personas_root,
    )
    repair_tail(rundir.transcripts_path)
    existing = _existing(rundir)
    todo: list[_Job] = []
    reused = 0
    for job in jobs:
        row = existing.get(job.dialogue_id)
        if row is None:
            todo.append(job)
            continue
        got = (row.get("system_config_hash"), (row.get("seeds") or {}).get("run"),
               ((row.get("stats") or {}).get("user_sim") or {}).get("hash"))
        want = (job.config_hash, seed, job.user_hash)
        if got != want:
            raise UserError(
                f"{rundir.transcripts_path}: dialogue '{job.dialogue_id}' was generated with a different system config, "
                f"model, user simulator or seed (config {got[0]} vs {want[0]}, seed {got[1]} vs {want[1]}); "
                "use a new --out folder or remove that file"
            )
        reused += 1
    started = _now()
    rundir.update_manifest(
        systems=sys_info, tasks=task_info, seeds={"generate": seed},
        models={"default": model, "user": user_model, "checkpoint": str(ckpt.dir) if ckpt else None,
                "checkpoint_hash": ckpt.hash if ckpt else None,
                "checkpoint_base_model": ckpt.base_model if ckpt else None},
        generate={"status": "running", "started": started, "dialogues": len(jobs), "reused": reused},
    )
    result = GenerateResult(new=0, reused=reused, failed=0, seconds=0.0)
    tally = Tally()
    sem = asyncio.Semaphore(concurrency or (settings.max_connections if settings else 8))
    bar = _Progress(len(jobs), reused, tally) if progress else None

    async def one(job: _Job) -> None:
        async with sem:
            try:
                t = await run_dialogue(job.system, job.user, job.task, job.context, job.profile, seed=seed,
                                       config_hash=job.config_hash, settings=settings, tally=tally)
            except UserError:
                raise
            except Exception as exc:  # a model failure loses this dialogue only; counted and reported
                result.failed += 1
                result.failures.append({"dialogue_id": job.dialogue_id, "error": f"{type(exc).__name__}: {exc}"[:500]})
                if bar:
                    bar.advance()
                return
            t.stats["user_sim"] = {"model": job.user.model, "template": job.user.template, "hash": job.user_hash}
            rundir.append_transcript(t)
            result.new += 1
            if bar:
                bar.advance()

    status = "done"
    try:
        if bar:
            bar.start()
        running = [asyncio.create_task(one(j)) for j in todo]
        try:
            await asyncio.gather(*running)
        except BaseException as exc:
            status = "stopped"
            if isinstance(exc, UserError):
                exc.generate_result = result  # type: ignore[attr-defined]  # what finished, for the CLI
            for r in running:
                r.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
    finally:
        if bar:
            bar.stop()
        result.seconds = round(time.perf_counter() - t0, 3)
        result.calls, result.tokens, result.cost_usd = tally.calls, tally.tokens, round(tally.cost_usd, 6)
        rundir.update_manifest(generate={
            "status": status if not result.failed or status != "done" else "done_with_failures",
            "started": started, "ended": _now(), "dialogues": len(jobs), "new": result.new, "reused": reused,
            "failed": result.failed, "failures": result.failures[:50], "seconds": result.seconds,
            "calls": result.calls, "tokens": result.tokens, "cost_usd": result.cost_usd,
        })
    return result


def generate(
    rundir: RunDir,
    tasks: list[TaskSpec],
    systems: list[str],
    *,
    model: str = "embedded",
    checkpoint: str | None = None,
    limit: int | None = None,
    data_dir: str | Path | None = None,
    settings: ClientSettings | None = None,
    seed: int = 0,
    progress: bool = True,
    **kwargs: Any,
) -> GenerateResult:
    """Synchronous entry point (see :func:`agenerate` for the extra keyword arguments)."""
    return asyncio.run(agenerate(rundir, tasks, systems, model=model, checkpoint=checkpoint, limit=limit,
                                 data_dir=data_dir, settings=settings, seed=seed, progress=progress, **kwargs))


class _Progress:
    """Rich progress bar on stderr: dialogues done, model calls, tokens and cost."""

    def __init__(self, total: int, done: int, tally: Tally) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.tally = tally
        self.p = Progress(
            TextColumn("generate"), BarColumn(), MofNCompleteColumn(), TextColumn("dialogues"),
            TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        )
        self.task = self.p.add_task("generate", total=total, completed=done, info=self._info())

    def _info(self) -> str:
        t = self.tally
        return f"calls {t.calls}  tokens {t.tokens}  ${t.cost_usd:.4f}"

    def start(self) -> None:
        self.p.start()

    def stop(self) -> None:
        self.p.update(self.task, info=self._info())
        self.p.stop()

    def advance(self) -> None:
        self.p.update(self.task, advance=1, info=self._info())
