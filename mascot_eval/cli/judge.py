"""`mascot-eval judge RUN_DIR --judges gpt,claude,local`: score existing transcripts (resumable)."""

from __future__ import annotations

import click

from .options import client_options, settings_from_options


def _fmt(v: float) -> str:
    return "-" if v != v else f"{v:.1f}"


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option(
    "--judges",
    "judges",
    default="local",
    show_default=True,
    help="Comma-separated judge names from judges/*.yaml (gpt, claude, local, ...) or model specs.",
)
@click.option("--levels", default="agent,group", show_default=True, help="Which rubrics: agent, group or both.")
@click.option("--progress/--no-progress", default=True, show_default=True)
@client_options
def judge(run_dir: str, judges: str, levels: str, progress: bool, **kw) -> None:
    """Score the transcripts in RUN_DIR with a panel of judges, without regenerating them.

    Appends one row per score to RUN_DIR/judgments.jsonl; a rerun skips what is done and reuses
    cached calls. Replies that cannot be parsed are re-asked once, then recorded as unscored (counted,
    never zero). Prints per-judge means on the 0-100 scale ((s-1)/4*100) with 95% bootstrap intervals.
    """
    from ..checks import check_judge_inputs
    from ..judges.agreement import panel_scores
    from ..judges.diagnostics import diagnostics_table
    from ..judges.run import judge_rundir, latest_judgments

    plan = check_judge_inputs(run_dir, judges, levels)  # everything checked before anything is written
    rd, specs = plan.rundir, plan.judges
    res = judge_rundir(rd, specs, settings=settings_from_options(**kw), levels=plan.levels, progress=progress)
    click.echo(
        f"judged {rd.path}: {res.new_units} new calls ({res.unscored_units} unscored), {res.reused_units} reused, "
        f"{res.seconds:.1f}s"
    )
    rows = [r for r in latest_judgments(rd.judgments()) if r["judge"] in {s.name for s in specs}]
    ps = panel_scores(rows, n_boot=1000)
    ov = ps[ps.criterion == "overall"]
    if not ov.empty:
        click.echo("\nOverall (0-100, mean [95% CI], n contexts; unscored counted separately):")
        for _, r in ov.sort_values(["level", "system", "judge"]).iterrows():
            click.echo(f"  {r.level:5s} {r.system:24s} {r.judge:10s} {_fmt(r['mean'])} [{_fmt(r.lo)}, {_fmt(r.hi)}] n={r.n}")
    d = diagnostics_table(rows, rd.transcripts())
    click.echo("\nJudge diagnostics:")
    for _, r in d.iterrows():
        click.echo(
            f"  {r.judge:10s} units={r.units} api_calls={r.api_calls} parse_failures={r.parse_failures} "
            f"({r.parse_failure_rate:.1%}) call_failures={r.call_failures} cost/100 dialogues=${r.cost_usd_per_100:.4f}"
        )
