"""`mascot-eval agreement RUN_DIR [--human FILE]`: agreement between judges (and with humans), diagnostics."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click


def _f(v: float) -> str:
    return "   -  " if v != v else f"{v:+.3f}"


def scoring_judges(rows: list[dict[str, Any]]) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """Judges with at least one scored row, and per judge (scored rows, all rows)."""
    total: Counter[str] = Counter(r["judge"] for r in rows)
    scored: Counter[str] = Counter(r["judge"] for r in rows if r.get("status") == "scored" and r.get("score") is not None)
    return sorted(j for j in total if scored[j]), {j: (scored[j], total[j]) for j in sorted(total)}


def _who_scored(rows: list[dict[str, Any]]) -> str:
    ok, counts = scoring_judges(rows)
    msg = f"{len(ok)} of {len(counts)} judge{'s' if len(counts) != 1 else ''} scored any item"
    silent = [f"{j}: 0 of {n} score rows scored" for j, (k, n) in counts.items() if k == 0]
    return msg + (f" ({'; '.join(silent)})" if silent else "")


def alpha_lines(rows: list[dict[str, Any]], *, n_boot: int = 1000, statistic: str = "alpha_ordinal") -> list[str]:
    """Krippendorff's alpha between the judges of a run, one line per level x criterion, for printed tables.

    ``rows`` are judgment rows (e.g. ``list(RunDir(path).judgments())``). When fewer than two judges
    scored the same items the single line says how many judges scored anything.
    """
    from ..judges.agreement import agreement_table
    from ..judges.run import latest_judgments

    rows = latest_judgments(rows)
    t = agreement_table(rows, n_boot=n_boot)
    t = t[t["statistic"] == statistic] if not t.empty else t
    if t.empty:
        return [f"judge agreement: needs two judges scoring the same items; {_who_scored(rows)}"]
    kind = statistic.removeprefix("alpha_")
    out = [f"judge agreement (Krippendorff alpha, {kind}; 95% bootstrap CI over items; judges {t.iloc[0].judges}):"]
    for _, r in t.iterrows():
        out.append(f"  {r.level} {r.criterion:12s} {_f(r.value)} [{_f(r.lo)}, {_f(r.hi)}] n={r.n_items}")
    ok, counts = scoring_judges(rows)
    if len(ok) < len(counts):
        out.append(f"  ({_who_scored(rows)})")
    return out


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

    from ..errors import UserError
    from ..fileio import atomic_write_text
    from ..judges.agreement import agreement_table, human_agreement
    from ..judges.diagnostics import diagnostics_table
    from ..judges.run import latest_judgments
    from ..runs.rundir import RunDir

    rd = RunDir(run_dir)
    rows = latest_judgments(rd.judgments())
    if judges:
        keep = {j.strip() for j in judges.split(",")}
        rows = [r for r in rows if r["judge"] in keep]
    if not rows:
        raise UserError(f"{rd.judgments_path}: no judgments; run `mascot-eval judge {run_dir} --judges ...` first")
    t = agreement_table(rows, n_boot=n_boot)
    atomic_write_text(rd.path / "agreement.csv", t.to_csv(index=False))
    if t.empty:
        click.echo(f"agreement needs at least two judges scoring the same items; {_who_scored(rows)}")
    else:
        click.echo("Agreement per criterion: value [95% CI] (n items)")
        for (level, crit), g in t.groupby(["level", "criterion"], sort=False):
            parts = [f"{r.statistic}{'' if r.statistic.startswith('alpha') else ' ' + r.judges}={_f(r.value)} [{_f(r.lo)},{_f(r.hi)}] (n={r.n_items})"
                     for _, r in g.iterrows()]
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
    if human_file:
        from ..judges.human import load_human

        h = load_human(human_file)
        ha = human_agreement(rows, h, n_boot=n_boot)
        atomic_write_text(rd.path / "human_agreement.csv", ha.to_csv(index=False))
        click.echo("\nHuman agreement (inter-annotator alpha; each judge vs the human mean):")
        for _, r in ha.iterrows():
            click.echo(f"  {r.level:5s} {r.criterion:12s} {r.statistic:15s} {r.judges:30s} {_f(r.value)} [{_f(r.lo)},{_f(r.hi)}] n={r.n_items}")
