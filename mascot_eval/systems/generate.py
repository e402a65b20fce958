"""Generate transcripts for tasks x systems into a run directory; reruns resume.

A dialogue is identified by ``<task>:<context>:<profile>:<system>``. :func:`plan_generation`
loads the contexts, builds every system, renders every template once and compares the plan with
the transcripts already in the run directory, writing nothing: a bad input or a run directory made
with other settings is refused before anything changes. :func:`agenerate` then holds the run's
lock and runs what is missing; finished dialogues are appended to ``transcripts.jsonl`` one
complete line at a time, failed attempts (with the calls they paid for) to ``failures.jsonl``.
Dialogues run concurrently (asyncio); model calls go through the shared client (cache, limits,
usage), so the same seed and cached calls give the same transcript.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends.client import ClientSettings
from ..checks import GeneratePlan, Pair, check_rundir_compatible, plan_from_specs
from ..data.context import Context
from ..errors import UserError
from ..fileio import read_jsonl
from ..records.usage import Usage
from ..runs.rundir import RunDir
from ..taskspec import TaskSpec
from ..transcript import make_dialogue_id
from .base import System
from .checkpoint import Checkpoint
from .engine import run_dialogue
from .user_sim import UserSimulator


@dataclass
class GenerateResult:
    new: int
    reused: int
    failed: int
    seconds: float
    failures: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    @property
    def calls(self) -> int:
        return self.usage.calls

    @property
    def tokens(self) -> int:
        return self.usage.tokens

    @property
    def cost_usd(self) -> float:
        return self.usage.cost_usd


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
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _existing(rundir: RunDir) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(rundir.transcripts_path, what="a transcripts file"):
        if "dialogue_id" in row:
            out[row["dialogue_id"]] = row
    return out


def plan_generation(
    rundir: RunDir,
    tasks: Sequence[TaskSpec],
    systems: Sequence[str],
    *,
    model: str = "embedded",
    user_model: str | None = None,
    checkpoint: str | Checkpoint | None = None,
    limit: int | None = None,
    data_dir: str | Path | None = None,
    seed: int = 0,
    pairs: dict[str, list[Pair]] | None = None,
    personas_root: str | Path | None = None,
) -> GeneratePlan:
    """Load contexts, build and preflight every system (:func:`mascot_eval.checks.plan_from_specs`) and
    check the run directory's transcripts against the plan; raises UserError, writes nothing."""
    from ..paths import data_dir as resolve_data_dir

    ddir = data_dir if isinstance(data_dir, Path) or data_dir is None else Path(data_dir)
    plan = plan_from_specs(
        tasks,
        systems,
        model=model,
        user_model=user_model,
        checkpoint=checkpoint,
        limit=limit,
        data_dir=resolve_data_dir(ddir) if ddir is not None else None,
        seed=seed,
        pairs=pairs,
        personas_root=personas_root,
    )
    check_rundir_compatible(rundir.path, plan)
    return plan


def _jobs(plan: GeneratePlan) -> list[_Job]:
    jobs = [
        _Job(u.task, ctx, profile, u.system, u.user, u.config_hash, u.user_hash)
        for u in plan.units
        for ctx, profile in plan.pairs[u.task.name]
    ]
    return list({j.dialogue_id: j for j in jobs}.values())


def _manifest_info(plan: GeneratePlan) -> dict[str, Any]:
    """What the manifest records about a generate plan: systems, tasks, models."""
    systems: dict[str, Any] = {}
    for u in plan.units:
        system = u.system
        info = systems.setdefault(
            system.config.name,
            {
                "kind": system.kind,
                "file": system.config.file,
                "checkpoint_parts": list(system.config.checkpoint),
                "config_hash": {},
                "models": {},
                "templates": {},
            },
        )
        info["config_hash"][u.task.name] = u.config_hash
        info["models"][u.task.name] = system.models
        info["templates"] = {t: system.templates.hash(t) for t in system.used_templates()}
    tasks = {
        t.name: {
            "version": t.version,
            "content_hash": t.content_hash,
            "split": t.split,
            "domain": t.domain,
            "rounds": t.rounds,
            "contexts": len(plan.pairs[t.name]),
            "file": t.file,
        }
        for t in plan.tasks
    }
    ck = plan.checkpoint
    models = {
        "default": plan.model,
        "user": plan.user_model,
        "checkpoint": str(ck.dir) if ck else None,
        "checkpoint_hash": ck.hash if ck else None,
        "checkpoint_base_model": ck.base_model if ck else None,
    }
    return {"systems": systems, "tasks": tasks, "models": models}


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
    plan: GeneratePlan | None = None,
) -> GenerateResult:
    t0 = time.perf_counter()
    if plan is None:
        plan = plan_generation(
            rundir,
            tasks,
            systems,
            model=model,
            user_model=user_model,
            checkpoint=checkpoint,
            limit=limit,
            data_dir=data_dir,
            seed=seed,
            pairs=pairs,
            personas_root=personas_root,
        )
    with rundir.lock():
        return await _execute(rundir, plan, settings=settings, progress=progress, concurrency=concurrency, t0=t0)


def _connections(settings: ClientSettings | None, spec: str) -> int:
    """Calls in flight for the system's model: ``--max-connections`` when given, else its backend's default
    (a local model batches many calls into one forward pass, an API takes 8)."""
    from ..backends.client import connections, get_client

    return connections(settings, get_client(spec, settings).backend)


async def _execute(
    rundir: RunDir, plan: GeneratePlan, *, settings: ClientSettings | None, progress: bool, concurrency: int | None, t0: float
) -> GenerateResult:
    from ..records.manifest import StepRecord
    from ..runs.ledger import record_ledger

    seed = plan.seed
    check_rundir_compatible(rundir.path, plan)  # again, under the lock: what another process finished counts
    jobs = _jobs(plan)
    done = set(_existing(rundir))
    todo = [j for j in jobs if j.dialogue_id not in done]
    reused = len(jobs) - len(todo)
    started = _now()
    rundir.update_manifest(
        **_manifest_info(plan),
        seeds={"generate": seed},
        steps={
            "generate": StepRecord(
                status="running", started=started, counts={"dialogues": len(jobs), "reused": reused}
            ).model_dump()
        },
    )
    result = GenerateResult(new=0, reused=reused, failed=0, seconds=0.0)
    tally = result.usage
    # Dialogues admitted at once: twice the connections, so that while one dialogue is between calls
    # (parsing an answer, rendering its next prompt, writing its transcript) another one's call is
    # already waiting for the free connection; the client's semaphore still caps calls in flight.
    connections = _connections(settings, plan.model)
    sem = asyncio.Semaphore(concurrency or 2 * connections)
    bar = _Progress(len(jobs), reused, tally) if progress else None
    loop = asyncio.get_running_loop()
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="transcripts")  # one writer: whole lines, in order

    def write(t: Any) -> None:  # in the writer thread; counted once the line is on disk
        rundir.append_transcript(t)
        result.new += 1

    def _record_attempt(job: _Job, calls: list[Any], error: str) -> None:
        rundir.append_failure(
            {
                "step": "generate",
                "id": job.dialogue_id,
                "error": error,
                "at": _now(),
                "calls": [c.model_dump(mode="json") for c in calls],
            }
        )

    async def one(job: _Job) -> None:
        async with sem:
            try:
                t = await run_dialogue(
                    job.system,
                    job.user,
                    job.task,
                    job.context,
                    job.profile,
                    seed=seed,
                    config_hash=job.config_hash,
                    settings=settings,
                    tally=tally,
                )
            except Exception as exc:  # a model failure loses this dialogue only; counted, recorded, reported
                calls = getattr(exc, "dialogue_calls", [])
                error = f"{type(exc).__name__}: {exc}"[:500]
                if isinstance(exc, UserError):  # the run stops (a limit, a bad input): what it paid is recorded
                    if calls:
                        _record_attempt(job, calls, f"stopped: {error}")
                    raise
                _record_attempt(job, calls, error)
                result.failed += 1
                result.failures.append({"id": job.dialogue_id, "error": error})
                if bar:
                    bar.advance()
                return
            except BaseException as exc:  # interrupted (Ctrl-C, SIGTERM): the calls it paid for are recorded
                calls = getattr(exc, "dialogue_calls", [])
                if calls:
                    _record_attempt(job, calls, f"interrupted: {type(exc).__name__}")
                raise
            t.stats["user_sim"] = {"model": job.user.model, "template": job.user.template, "hash": job.user_hash}
        # the append (with fsync) runs in the writer thread, not in the event loop, once the slot is free;
        # shielded: a stopped run still writes a dialogue that finished
        await asyncio.shield(loop.run_in_executor(writer, write, t))
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
        writer.shutdown(wait=True)  # every transcript handed to the writer is on disk before the manifest says so
        if bar:
            bar.stop()
        result.seconds = round(time.perf_counter() - t0, 3)
        if status == "done" and result.failed:
            status = "done_with_failures"
        rundir.update_manifest(
            steps={
                "generate": StepRecord(
                    status=status,
                    started=started,
                    ended=_now(),
                    seconds=result.seconds,
                    counts={"dialogues": len(jobs), "new": result.new, "reused": reused, "failed": result.failed},
                    failures=result.failures[:20],
                ).model_dump()
            }
        )
        record_ledger(rundir)
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
    from ..aio import run_sync

    return run_sync(
        agenerate(
            rundir,
            tasks,
            systems,
            model=model,
            checkpoint=checkpoint,
            limit=limit,
            data_dir=data_dir,
            settings=settings,
            seed=seed,
            progress=progress,
            **kwargs,
        )
    )


class _Progress:
    """Rich progress bar on stderr: dialogues done, model calls, tokens and cost."""

    def __init__(self, total: int, done: int, tally: Usage) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.tally = tally
        self.p = Progress(
            TextColumn("generate"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("dialogues"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
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
