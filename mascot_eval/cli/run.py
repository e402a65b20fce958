"""`mascot-eval run`: the whole job in one command (generate -> judge -> metrics -> summary -> report).

Every step reads what the previous one wrote into the run directory and skips what is already
there, so a killed run resumes where it stopped when the same command is run again. Without
``--out`` the run directory is named after the settings (``results/runs/<tasks>_<systems>-<hash>``),
so rerunning the same command resumes the same run instead of starting a new one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from ..stats.decisions import DEFAULT_MAX_FALLBACK_SHARE, decision_stats, fallback_warnings
from .options import client_options, pop_client_options


def _none(names: list[str]) -> bool:
    return names == ["none"]


@click.command()
@click.option(
    "--task",
    "tasks",
    multiple=True,
    default=("demo",),
    show_default=True,
    help="Task name, task file or suite (in-domain, ood, all); repeat or comma-separate.",
)
@click.option(
    "--system",
    "systems",
    multiple=True,
    default=("mascot",),
    show_default=True,
    help="System name (see `mascot-eval systems list`) or a YAML path; repeat or comma-separate.",
)
@click.option(
    "--judges",
    default=None,
    help="Comma-separated judges (gpt, claude, local, a judges/*.yaml name or a model spec), or 'none'. "
    "Default: the judges the task files name (judging.judges).",
)
@click.option(
    "--metrics",
    "metric_names",
    default=None,
    help="Comma-separated metric names, 'all' or 'none' (see `mascot-eval metrics --list`). "
    "Default: the metrics the task files name.",
)
@click.option("--levels", default="agent,group", show_default=True, help="Judge rubrics: agent, group or both.")
@click.option(
    "--model",
    default="embedded",
    show_default=True,
    help="Model spec for every role a system does not set itself (embedded, hf/..., openai/..., ...).",
)
@click.option("--user-model", default=None, help="Model spec of the simulated user (default: --model).")
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False),
    default=None,
    help="Trainer output folder (checkpoint.json + LoRA adapters) for mascot, its ablations and sft.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Use only the first N contexts of each task (default: the task's sample size).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Run directory (default: results/runs/<tasks>_<systems>-<settings hash>; the same command resumes it).",
)
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Dataset folder (default: $MASCOT_DATA_DIR).")
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed (sampling and bootstrap).")
@click.option("--reference", default=None, help="System the others are tested against (default: mascot if present).")
@click.option(
    "--test",
    type=click.Choice(["wilcoxon", "permutation"]),
    default="wilcoxon",
    show_default=True,
    help="Paired test between systems on shared contexts (Holm-corrected).",
)
@click.option("--n-boot", type=click.IntRange(100, 100000), default=2000, show_default=True, help="Bootstrap replicates.")
@click.option(
    "--max-fallback-share",
    type=click.FloatRange(0.0, 1.0),
    default=DEFAULT_MAX_FALLBACK_SHARE,
    show_default=True,
    help="Print a warning when a system's Director (or MultiAgentESC's strategies or votes) fell back on more than this share of its decisions.",
)
@click.option("--no-report", is_flag=True, default=False, help="Skip the HTML report.")
@click.option("--no-progress", is_flag=True, default=False, help="Do not show progress.")
@client_options
def run(
    tasks,
    systems,
    judges,
    metric_names,
    levels,
    model,
    user_model,
    checkpoint,
    limit,
    out,
    data_dir,
    seed,
    reference,
    test,
    n_boot,
    max_fallback_share,
    no_report,
    no_progress,
    **kw,
) -> None:
    """Evaluate systems on tasks end to end: generate dialogues, judge them, compute the automatic
    metrics, write summary.json (means, n, 95% bootstrap intervals, paired tests) and report.html.

    With no flags: MASCOT on the built-in demo task with the embedded SmolLM2 model and the local judge.

    \b
    Examples:
      mascot-eval run
      mascot-eval run --task in-domain --system mascot,zero-shot,multiagentesc --judges gpt,claude
      mascot-eval run --system mascot --checkpoint checkpoints/tiny --out results/runs/candidate

    \b
    Exit codes:
      0  complete: every call was answered
      1  complete_with_failures (a call failed for good; one line per step names the counts and
         first causes; a rerun retries only those), or failed (no dialogue finished)
      2  bad input, nothing written; or another process holds the run directory
    """
    from ..checks import check_run_inputs, check_rundir_compatible
    from ..errors import UserError
    from ..fileio import stable_hash
    from ..runs.manifest import finish_run, start_run
    from ..runs.rundir import RunDir

    t_start = time.perf_counter()
    settings = pop_client_options(kw)
    if out:  # a folder locked by another writer is refused before the (possibly slow) check
        RunDir.planned(Path(out)).check_not_locked()
    # everything the run will use is loaded and checked before the run directory is touched
    plan = check_run_inputs(
        tasks=tasks,
        systems=systems,
        judges=judges,
        metrics=metric_names,
        levels=levels,
        model=model,
        user_model=user_model,
        checkpoint=checkpoint,
        limit=limit,
        data_dir=data_dir,
        seed=seed,
        out=out,
    )
    gen = plan.generate
    judge_names, metrics_list, level_list = plan.judge_names, plan.metrics, plan.levels
    identity = {
        "tasks": {t.name: t.content_hash for t in gen.tasks},
        "systems": gen.systems,
        "model": model,
        "user_model": user_model,
        "checkpoint": str(Path(checkpoint).resolve()) if checkpoint else None,
        "limit": limit,
        "seed": seed,
    }
    run_settings = {
        **identity,
        "judges": judge_names,
        "metrics": metrics_list,
        "levels": level_list,
        "max_connections": settings.max_connections,
        "cost_limit": settings.cost_limit,
        "use_cache": settings.use_cache,
    }
    if out:
        rundir = RunDir.planned(Path(out))
    else:
        slug = "+".join(t.name for t in gen.tasks)[:40] + "_" + "+".join(gen.systems)[:40]
        rundir = RunDir.default(f"{slug}-{stable_hash(identity)[:8]}".replace("/", "_"), create=False)
        rundir.check_not_locked()
        check_rundir_compatible(rundir.path, gen)
    from ..judges.score import Judge

    panel = [Judge(spec, settings) for spec in plan.judges] or None
    task_specs = gen.tasks

    steps: dict[str, Any] = {}
    with rundir.lock():
        start_run(rundir, command=["mascot-eval", *sys.argv[1:]], settings=run_settings, tasks=task_specs)
        click.echo(f"run directory: {rundir.path}", err=True)
        try:
            steps["generate"] = _generate(rundir, gen, settings=settings, progress=not no_progress)
            if not rundir.transcripts():
                finish_run(rundir, status="failed", steps=_step_records(rundir))
                _print_failures(rundir, steps)
                click.echo("failed: no dialogue finished, nothing to evaluate; fix the causes above and rerun", err=True)
                raise SystemExit(1)
            if panel is not None:
                steps["judge"] = _judge(rundir, panel, judge_names, settings, level_list, progress=not no_progress)
            if not _none(metrics_list):
                steps["metrics"] = _metrics(rundir, metrics_list)
            steps["summary"] = _summary(rundir, reference=reference, test=test, n_boot=n_boot, seed=seed)
            if not no_report:
                steps["report"] = _report(rundir)
        except (UserError, KeyboardInterrupt):
            finish_run(rundir, status="stopped", steps=_step_records(rundir))
            click.echo(f"stopped: what finished is saved in {rundir.path}; rerun the same command to resume", err=True)
            raise
        failed = _failed_steps(steps)
        status = "complete_with_failures" if failed else "complete"
        finish_run(rundir, status=status, steps=_step_records(rundir))
    _print_results(rundir)
    for line in fallback_warnings(decision_stats(rundir.transcripts()), max_share=max_fallback_share):
        click.echo(line, err=True)
    click.echo(f"\n{status} in {time.perf_counter() - t_start:.1f}s; run directory: {rundir.path}")
    if "report" in steps:
        click.echo(f"report: {steps['report']['path']}")
    if failed:
        _print_failures(rundir, steps)
        click.echo("some model calls failed for good; rerun the same command to retry them", err=True)
        raise SystemExit(1)


def _step_records(rundir) -> dict[str, Any]:
    """This invocation's step records, as the steps wrote them into the manifest."""
    m = rundir.read_manifest()
    return dict(m.get("steps") or {})


def _failed_steps(steps: dict[str, Any]) -> list[str]:
    out = []
    if (steps.get("generate") or {}).get("failed"):
        out.append("generate")
    if (steps.get("judge") or {}).get("failed_units"):
        out.append("judge")
    return out


def _print_failures(rundir, steps: dict[str, Any]) -> None:
    """One line per step with failures: counts and the first causes."""
    g = steps.get("generate") or {}
    if g.get("failed"):
        causes = "; ".join(f"{f['id']}: {f['error']}" for f in g.get("failures", [])[:3])
        total = g.get("failed", 0) + g.get("new", 0) + g.get("reused", 0)
        click.echo(f"generate: {g['failed']} of {total} dialogue(s) failed; first causes: {causes}", err=True)
    j = steps.get("judge") or {}
    if j.get("failed_units"):
        causes = "; ".join(f"{f['id']}: {f['error']}" for f in j.get("failures", [])[:3])
        click.echo(
            f"judge: {j['failed_units']} of {j['new_units']} new judge call(s) failed for good; first causes: {causes}", err=True
        )


def _generate(rundir, plan, *, settings, progress: bool) -> dict[str, Any]:
    from ..aio import run_sync
    from ..errors import UserError
    from ..systems.generate import agenerate

    click.echo(f"[1/5] generate: {', '.join(t.name for t in plan.tasks)} x {', '.join(plan.systems)}", err=True)
    try:
        res = run_sync(agenerate(rundir, [], [], plan=plan, settings=settings, progress=progress))
    except UserError as exc:
        partial = getattr(exc, "generate_result", None)
        if partial is not None:
            click.echo(f"generate stopped: {partial.new} new dialogue(s) saved, {partial.reused} reused", err=True)
        raise
    click.echo(
        f"      {res.new} new, {res.reused} reused, {res.failed} failed dialogue(s) in {res.seconds:.1f}s "
        f"({res.calls} calls, {res.usage.retries} retries, {res.tokens} tokens, ${res.cost_usd:.4f})",
        err=True,
    )
    return {
        "new": res.new,
        "reused": res.reused,
        "failed": res.failed,
        "failures": res.failures[:50],
        "seconds": res.seconds,
        "calls": res.calls,
        "tokens": res.tokens,
        "cost_usd": res.cost_usd,
    }


def _judge(rundir, panel, judge_names: list[str], settings, levels: list[str], *, progress: bool) -> dict[str, Any]:
    from ..judges.run import judge_rundir

    click.echo(f"[2/5] judge: {', '.join(judge_names)} ({', '.join(levels)} rubrics)", err=True)
    res = judge_rundir(rundir, panel, settings=settings, levels=levels, progress=progress)
    click.echo(
        f"      {res.new_units} new judge calls ({res.unscored_units} unscored, {res.failed_units} failed), "
        f"{res.reused_units} reused, {res.seconds:.1f}s",
        err=True,
    )
    return {
        "judges": judge_names,
        "new_units": res.new_units,
        "reused_units": res.reused_units,
        "unscored_units": res.unscored_units,
        "failed_units": res.failed_units,
        "failures": res.failures,
        "seconds": round(res.seconds, 3),
        "per_judge": res.per_judge,
    }


def _metrics(rundir, names: list[str]) -> dict[str, Any]:
    from ..metrics.compute import compute_rundir

    click.echo(f"[3/5] metrics: {', '.join(names)}", err=True)
    t0 = time.perf_counter()
    df = compute_rundir(rundir, None if names == ["all"] else names)
    seconds = time.perf_counter() - t0
    step = (rundir.read_manifest().get("steps") or {}).get("metrics") or {}
    reused = len((step.get("counts") or {}).get("reused") or [])
    click.echo(f"      {len(df)} metric rows in {seconds:.1f}s ({reused} metric(s) reused)", err=True)
    return {"rows": int(len(df)), "seconds": round(seconds, 3)}


def _summary(rundir, **kw) -> dict[str, Any]:
    from ..runs.summary import summarize

    click.echo("[4/5] statistics: bootstrap intervals, paired tests, agreement", err=True)
    t0 = time.perf_counter()
    s = summarize(rundir, **kw)
    return {
        "path": str(rundir.summary_path),
        "estimates": len(s["estimates"]),
        "comparisons": len(s["comparisons"]),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _report(rundir) -> dict[str, Any]:
    from ..records.manifest import StepRecord
    from ..reports.html import render_report, report_inputs

    click.echo("[5/5] report", err=True)
    t0 = time.perf_counter()
    before = report_inputs(rundir.report_path)
    path = render_report([rundir], rundir.report_path)
    status = "skipped" if before is not None and before == report_inputs(path) else "done"
    seconds = round(time.perf_counter() - t0, 3)
    rundir.update_manifest(
        steps={"report": StepRecord(status=status, seconds=seconds, inputs_hash=report_inputs(path)).model_dump()}
    )
    return {"path": str(path), "seconds": seconds}


# measures printed in the compact table (the report and summary.json hold everything)
SHOWN = [
    ("agent.overall", "agent overall"),
    ("group.overall", "group overall"),
    ("metric.inter_agent_selfbleu", "self-BLEU"),
    ("metric.persona_separability", "persona sep."),
]


def _print_results(rundir) -> None:
    import json

    from rich.console import Console
    from rich.table import Table

    summary = json.loads(rundir.summary_path.read_text())
    est = [e for e in summary["estimates"] if e.get("judge") == "all"]
    shown = [(m, h) for m, h in SHOWN if any(e["measure"] == m for e in est)]
    table = Table(title="Results (0-100 for judge scores; mean [95% CI] n contexts)", show_lines=False)
    table.add_column("system")
    table.add_column("split")
    for _, head in shown:
        table.add_column(head, justify="right")
    keys = sorted({(e["label"], e["split"]) for e in est})
    for label, split in keys:
        cells = []
        for m, _ in shown:
            e = next((x for x in est if x["label"] == label and x["split"] == split and x["measure"] == m), None)
            cells.append(_cell(e))
        table.add_row(label, split, *cells)
    console = Console()
    console.print(table)
    unscored = summary["counts"].get("judgments_unscored") or {}
    scored = summary["counts"].get("judgments_scored") or {}
    for judge in sorted(set(unscored) | set(scored)):
        bad = sum(unscored.get(judge, {}).values())
        total = bad + scored.get(judge, 0)
        if total:
            console.print(f"judge {judge}: {bad}/{total} score rows unscored ({bad / total:.0%}), never counted as zero")
    failed = summary["counts"].get("judgments_failed") or {}
    counts = {
        j: (scored.get(j, 0), scored.get(j, 0) + sum(unscored.get(j, {}).values()) + failed.get(j, 0))
        for j in sorted(set(unscored) | set(scored) | set(failed))
    }
    if len(counts) > 1:
        from .agreement import agreement_lines

        for line in agreement_lines(summary.get("agreement") or [], counts):
            console.print(line, highlight=False)


def _cell(e: dict[str, Any] | None) -> str:
    if not e or e.get("mean") is None:
        return "-"
    digits = 1 if e["measure"].startswith(("agent.", "group.")) else 3
    lo, hi = e.get("lo"), e.get("hi")
    ci = f" [{lo:.{digits}f}, {hi:.{digits}f}]" if lo is not None and hi is not None else ""
    return f"{e['mean']:.{digits}f}{ci} n={e['n']}"
