"""`mascot-eval regress --baseline RUN_OR_CSV --candidate RUN_DIR [--tolerance 2.0] [--metrics ...]`.

Exit codes: 0 = no real drop beyond the tolerance; 1 = at least one measure dropped by more than
the tolerance and the paired test (Holm-corrected) says the drop is real; 2 = unusable inputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..fileio import atomic_write_text
from ..runs.regress import regress as run_regress


@click.command()
@click.option("--baseline", required=True, type=click.Path(exists=True),
              help="Reference: a run directory (paired test) or a leaderboard CSV (one-sample test against its means).")
@click.option("--candidate", required=True, type=click.Path(exists=True, file_okay=False), help="Run directory of the new checkpoint.")
@click.option("--tolerance", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Allowed drop, in the measure's units (points on the 0-100 judge scale).")
@click.option("--metrics", "metrics", multiple=True,
              help="Measures to check, MEASURE[:higher|lower][=TOL], repeatable or comma-separated "
                   "(e.g. agent.consistency, group.overall, metric.inter_agent_selfbleu:lower=0.02). "
                   "Default: every judge criterion and overall in both.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
              help="Significance level for the Holm-corrected test.")
@click.option("--test", type=click.Choice(["wilcoxon", "permutation"]), default="wilcoxon", show_default=True)
@click.option("--system", default=None, help="System to check in the candidate run (needed when it has several).")
@click.option("--baseline-system", default=None, help="System in the baseline (default: the candidate's).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Also write the table as CSV.")
def regress(baseline, candidate, tolerance, metrics, alpha, test, system, baseline_system, out):
    """Fail (exit 1) when the candidate is really worse than the baseline; exit 0 otherwise; 2 on unusable inputs."""
    specs = [s for m in metrics for s in m.split(",") if s.strip()] or None
    res = run_regress(baseline, candidate, tolerance=tolerance, metrics=specs, alpha=alpha, test=test,
                      system=system, baseline_system=baseline_system)
    click.echo(f"baseline: {res.baseline}\ncandidate: {res.candidate}\ntest: {res.test} ({res.mode}), Holm-corrected, alpha={res.alpha}")
    for n in res.notes:
        click.echo(f"note: {n}")
    click.echo(res.table())
    if out:
        atomic_write_text(Path(out), res.frame().to_csv(index=False))
    fails = [r for r in res.rows if r.verdict == "FAIL"]
    if fails:
        click.echo(f"REGRESSION: {len(fails)} measure(s) dropped by more than the tolerance with p_holm < {alpha}: "
                   + ", ".join(f"{r.measure} ({r.split}) {r.change:+.2f}" for r in fails))
        sys.exit(1)
    click.echo("PASS: no measure dropped by more than the tolerance with a significant paired test")
