"""`mascot-eval regress --baseline RUN_OR_CSV --candidate RUN_DIR [--margin 2] [--metrics ...]`.

Exit codes: 0 every measure PASSes (non-inferior: lower confidence bound above -margin); 1 any
measure FAILs (upper bound below -margin); 3 any is INCONCLUSIVE (``--inconclusive pass|fail``
maps it to 0 or 1); 2 unusable inputs (runs not comparable, missing measures, no shared contexts).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..fileio import atomic_write_text
from ..runs.regress import FIELDS
from ..runs.regress import regress as run_regress


def _split(values: tuple[str, ...]) -> list[str]:
    return [s.strip() for v in values for s in v.split(",") if s.strip()]


@click.command()
@click.option(
    "--baseline",
    required=True,
    type=click.Path(exists=True),
    help="Reference: a run directory (paired gate on shared contexts) or a leaderboard CSV (unpaired, "
    "with the baseline's error from its intervals).",
)
@click.option(
    "--candidate", required=True, type=click.Path(exists=True, file_okay=False), help="Run directory of the new checkpoint."
)
@click.option(
    "--margin",
    "--tolerance",
    "margin",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Drop the gate tolerates on judge measures, in points on the 0-100 scale (metrics set their own: MEASURE:lower=0.02).",
)
@click.option(
    "--metrics",
    "metrics",
    multiple=True,
    help="Measures to gate, MEASURE[:higher|lower][=MARGIN], repeatable or comma-separated "
    "(e.g. agent.overall,group.overall=3,metric.inter_agent_selfbleu:lower=0.02). "
    "Default: every judge criterion and overall in both runs.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Family-wise error of the gate: each of the K bounds is one-sided at alpha/K (Bonferroni).",
)
@click.option(
    "--power",
    type=click.FloatRange(0.5, 1, max_open=True),
    default=0.8,
    show_default=True,
    help="Power for the minimum detectable drop printed per measure.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["bound", "point"]),
    default="bound",
    show_default=True,
    help="FAIL when the upper bound is below -margin (bound), or also when the point drop alone exceeds "
    "the margin (point; no error control for that part).",
)
@click.option(
    "--inconclusive",
    type=click.Choice(["pass", "fail"]),
    default=None,
    help="Exit code for an INCONCLUSIVE gate: 0 (pass) or 1 (fail). Default: 3.",
)
@click.option(
    "--allow-mismatch",
    "allow",
    multiple=True,
    help=f"Compare although this field differs (printed with the verdict); repeatable: {', '.join(FIELDS)}.",
)
@click.option("--system", default=None, help="System to check in the candidate run (needed when it has several).")
@click.option("--baseline-system", default=None, help="System in the baseline (default: the candidate's).")
@click.option("--n-boot", type=click.IntRange(200, 100000), default=2000, show_default=True, help="Bootstrap replicates.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Also write the table as CSV.")
def regress(
    baseline, candidate, margin, metrics, alpha, power, fail_on, inconclusive, allow, system, baseline_system, n_boot, seed, out
):
    """Gate a candidate run against a baseline: per measure PASS (non-inferior within its margin), FAIL or
    INCONCLUSIVE, from one-sided confidence bounds on the paired difference (cluster bootstrap over
    contexts, Bonferroni over the measures). The first line says whether the gate has the power to
    resolve its margins. Exit 0 pass, 1 fail, 3 inconclusive, 2 unusable or not comparable inputs.
    """
    res = run_regress(
        baseline,
        candidate,
        margin=margin,
        metrics=_split(metrics) or None,
        alpha=alpha,
        power=power,
        fail_on=fail_on,
        system=system,
        baseline_system=baseline_system,
        allow=_split(allow),
        n_boot=n_boot,
        seed=seed,
    )
    click.echo(res.first_line())
    for line in res.header():
        click.echo(line)
    click.echo(res.table())
    if out:
        atomic_write_text(Path(out), res.frame().to_csv(index=False))
    click.echo(res.verdict_line(inconclusive))
    sys.exit(res.exit_code(inconclusive))
