"""`mascot-eval agreement RUN_DIR [--human FILE]`: agreement between judges (and with humans), diagnostics."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click


def _f(v: float | None) -> str:
    return "   -  " if v is None or v != v else f"{v:+.3f}"


def scoring_judges(rows: list[dict[str, Any]]) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """Judges with at least one scored row, and per judge (scored rows, all rows)."""
    total: Counter[str] = Counter(r["judge"] for r in rows)
    scored: Counter[str] = Counter(r["judge"] for r in rows if r.get("status") == "scored" and r.get("score") is not None)
    return sorted(j for j in total if scored[j]), {j: (scored[j], total[j]) for j in sorted(total)}


def _who_scored_counts(counts: dict[str, tuple[int, int]]) -> str:
    ok = [j for j, (k, _) in counts.items() if k]
    msg = f"{len(ok)} of {len(counts)} judge{'s' if len(counts) != 1 else ''} scored any item"
    silent = [f"{j}: 0 of {n} score rows scored" for j, (k, n) in counts.items() if k == 0]
    return msg + (f" ({'; '.join(silent)})" if silent else "")


def _who_scored(rows: list[dict[str, Any]]) -> str:
    return _who_scored_counts(scoring_judges(rows)[1])


def agreement_lines(
    agreement: list[dict[str, Any]], counts: dict[str, tuple[int, int]], *, statistic: str = "alpha_ordinal"
) -> list[str]:
    """Printed lines from agreement records (``summary.json``'s ``agreement``) and per judge (scored rows,
    all rows): one line per level x criterion, or one line saying how many judges scored anything."""
    recs = [r for r in agreement if r.get("statistic") == statistic]
    if not recs:
        return [f"judge agreement: needs two judges scoring the same items; {_who_scored_counts(counts)}"]
    kind = statistic.removeprefix("alpha_")
    out = [f"judge agreement (Krippendorff alpha, {kind}; 95% bootstrap CI over items; judges {recs[0]['judges']}):"]
    for r in recs:
        out.append(f"  {r['level']} {r['criterion']:12s} {_f(r['value'])} [{_f(r['lo'])}, {_f(r['hi'])}] n={r['n_items']}")
    if sum(1 for k, _ in counts.values() if k) < len(counts):
        out.append(f"  ({_who_scored_counts(counts)})")
    return out


def alpha_lines(rows: list[dict[str, Any]], *, n_boot: int = 1000, statistic: str = "alpha_ordinal") -> list[str]:
    """Krippendorff's alpha between the judges of a run, one line per level x criterion, for printed tables.

    ``rows`` are judgment rows (e.g. ``list(RunDir(path).judgments())``). When fewer than two judges
    scored the same items the single line says how many judges scored anything.
    """
    from ..judges.agreement import agreement_table
    from ..judges.run import latest_judgments
    from ..runs.summary import records

    rows = latest_judgments(rows)
    t = agreement_table(rows, n_boot=n_boot)
    return agreement_lines(records(t) if not t.empty else [], scoring_judges(rows)[1], statistic=statistic)


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option(
    "--human",
    "human_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Human ratings: the JSONL from `human import`, or a filled sheet CSV (key.json beside it).",
)
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
    if t.empty:
        click.echo(f"agreement needs at least two judges scoring the same items; {_who_scored(rows)}")
    else:
        click.echo("Agreement per criterion: value [95% CI] (n items)")
        for (level, crit), g in t.groupby(["level", "criterion"], sort=False):
            parts = [
                f"{r.statistic}{'' if r.statistic.startswith('alpha') else ' ' + r.judges}={_f(r.value)} [{_f(r.lo)},{_f(r.hi)}] (n={r.n_items})"
                for _, r in g.iterrows()
            ]
            click.echo(f"  {level:5s} {crit:12s} " + "; ".join(parts))
        ok, counts = scoring_judges(rows)
        if len(ok) < len(counts):
            click.echo(f"  ({_who_scored(rows)})")
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
            click.echo(
                f"  {r.level:5s} {r.criterion:12s} {r.statistic:15s} {r.judges:30s} {_f(r.value)} [{_f(r.lo)},{_f(r.hi)}] n={r.n_items}"
            )
