"""`mascot-eval agreement RUN_DIR [--human FILE]`: agreement between judges (and with humans), diagnostics."""

from __future__ import annotations

import click


def _f(v: float) -> str:
    return "   -  " if v != v else f"{v:+.3f}"


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--human", "human_file", type=click.Path(dir_okay=False), default=None,
              help="Human ratings: the JSONL from `human import`, or a filled sheet CSV (key.json beside it).")
@click.option("--judges", default=None, help="Only these judges (comma-separated); default: all in judgments.jsonl.")
@click.option("--n-boot", type=click.IntRange(min=100), default=1000, show_default=True, help="Bootstrap replicates.")
def agreement(run_dir: str, human_file: str | None, judges: str | None, n_boot: int) -> None:
    """Krippendorff's alpha (ordinal, interval) and pairwise Spearman per criterion, with 95% bootstrap
    intervals over items; judge diagnostics (parse failures, position and length bias, cost).

    Writes RUN_DIR/agreement.csv, RUN_DIR/judge_diagnostics.csv (and human_agreement.csv with --human).
    """
    import pandas as pd

    from ..checks import check_agreement_inputs
    from ..fileio import atomic_write_text
    from ..judges.agreement import agreement_table, human_agreement
    from ..judges.diagnostics import diagnostics_table

    plan = check_agreement_inputs(run_dir, judges, human_file)  # judgments and the human file read before writing
    rd, rows = plan.rundir, plan.rows
    t = agreement_table(rows, n_boot=n_boot)
    atomic_write_text(rd.path / "agreement.csv", t.to_csv(index=False))
    n_judges = len({r["judge"] for r in rows})
    if t.empty:
        click.echo(f"agreement needs at least two judges scoring the same items; found {n_judges} judge(s)")
    else:
        click.echo("Agreement per criterion: value [95% CI] (n items)")
        for (level, crit), g in t.groupby(["level", "criterion"], sort=False):
            parts = [f"{r.statistic}{'' if r.statistic.startswith('alpha') else ' ' + r.judges}={_f(r.value)} [{_f(r.lo)},{_f(r.hi)}] (n={r.n_items})"
                     for _, r in g.iterrows()]
            click.echo(f"  {level:5s} {crit:12s} " + "; ".join(parts))
    comps = list(rd.comparisons())
    d = diagnostics_table(rows, rd.transcripts(), comps)
    atomic_write_text(rd.path / "judge_diagnostics.csv", d.to_csv(index=False))
    click.echo("\nJudge diagnostics:")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        click.echo(d.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if plan.human is not None:
        ha = human_agreement(rows, plan.human, n_boot=n_boot)
        atomic_write_text(rd.path / "human_agreement.csv", ha.to_csv(index=False))
        click.echo("\nHuman agreement (inter-annotator alpha; each judge vs the human mean):")
        for _, r in ha.iterrows():
            click.echo(f"  {r.level:5s} {r.criterion:12s} {r.statistic:15s} {r.judges:30s} {_f(r.value)} [{_f(r.lo)},{_f(r.hi)}] n={r.n_items}")
