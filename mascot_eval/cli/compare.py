"""`mascot-eval compare RUN_A RUN_B RUN_C --judges ...`: three-way comparisons on shared contexts."""

from __future__ import annotations

import click

from .options import client_options, settings_from_options


def _pct(e: dict) -> str:
    if e["n"] == 0:
        return "-"
    return f"{e['mean']:.0%} [{e['lo']:.0%}, {e['hi']:.0%}]"


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--judges", default="local", show_default=True, help="Comma-separated judge names or model specs.")
@click.option(
    "--orders",
    "order_mode",
    type=click.Choice(["all", "rotations"]),
    default="all",
    show_default=True,
    help="all: the 6 orders of the three transcripts; rotations: 3 (each system once per position).",
)
@click.option("--systems", default=None, help="Exactly three system names when the runs hold more than three.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Run directory that receives comparisons.jsonl (default: the first RUN_DIR).",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N shared contexts.")
@click.option("--progress/--no-progress", default=True, show_default=True)
@client_options
def compare(run_dirs, judges, order_mode, systems, out_dir, limit, progress, **kw) -> None:
    """Ask judges which of three systems' dialogues on the same context is best.

    Pass three run directories (one system each) or one directory holding three systems. Every
    context is shown in all orders to cancel position bias; labels are mapped back to systems.
    Writes comparisons.jsonl and comparisons_summary.json (win/tie/loss with bootstrap intervals,
    first-position pick rate, order disagreement, Bradley-Terry ranking).
    """
    from ..checks import check_compare_inputs
    from ..fileio import atomic_write_json
    from ..judges.threeway import compare_runs, summarize_comparisons
    from ..runs.rundir import RunDir

    plan = check_compare_inputs(run_dirs, judges, systems, out_dir)  # before --out is created or anything written
    rds, names = plan.rundirs, plan.systems
    out = RunDir(plan.out, create=True) if plan.out else rds[0]
    res = compare_runs(
        rds,
        plan.judges,
        out=out,
        systems=names,
        order_mode=order_mode,
        limit=limit,
        settings=settings_from_options(**kw),
        progress=progress,
    )
    rows = [r for r in out.comparisons() if sorted(r["systems"]) == sorted(res.systems)]
    summary = summarize_comparisons(rows)
    atomic_write_json(out.path / "comparisons_summary.json", summary)
    click.echo(
        f"compared {', '.join(res.systems)} on {res.contexts} contexts: {res.new} new calls "
        f"({res.unscored} unscored), {res.reused} reused -> {out.comparisons_path}"
    )
    for judge, b in summary["judges"].items():
        click.echo(
            f"\njudge {judge}: {b['n_valid']} valid / {b['n_calls']} calls "
            f"(unscored {b['unscored_rate']:.0%}), first-position picks {_pct(b['first_position_rate'])} "
            f"(33% = no bias), orders disagree on {_pct(b['order_disagreement'])} of contexts"
        )
        bt = b["bradley_terry"].get("systems", {})
        for s in res.systems:
            e = b["systems"][s]
            extra = (
                f"  BT {bt[s]['strength']:+.2f} [{bt[s]['lo']:+.2f}, {bt[s]['hi']:+.2f}] rank {bt[s]['rank']}" if s in bt else ""
            )
            click.echo(f"  {s:24s} win {_pct(e['win'])}  tie {_pct(e['tie'])}  loss {_pct(e['loss'])}{extra}")
