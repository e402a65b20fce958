"""`mascot-eval plan --pilot RUN_DIR --margin 5 [--power 0.8]`: how many contexts a regression gate needs."""

from __future__ import annotations

import math

import click

from ..runs.regress import _fmt
from ..runs.regress import plan as run_plan


def _split(values: tuple[str, ...]) -> list[str]:
    return [s.strip() for v in values for s in v.split(",") if s.strip()]


@click.command()
@click.option(
    "--pilot",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="Pilot run directory: two systems (paired), or the candidate side of a pair with --baseline, "
    "or one system (no pairing assumed).",
)
@click.option(
    "--baseline",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="Baseline run directory paired with the pilot on shared contexts.",
)
@click.option(
    "--margin",
    type=click.FloatRange(min=0, min_open=True),
    default=2.0,
    show_default=True,
    help="Drop the gate tolerates on judge measures (0-100 points); metrics set their own (MEASURE:lower=0.02).",
)
@click.option(
    "--metrics",
    "metrics",
    multiple=True,
    help="The gate's measures, as for `regress --metrics` (their number sets the Bonferroni level). "
    "Default: every judge criterion and overall.",
)
@click.option(
    "--power",
    type=click.FloatRange(0.5, 1, max_open=True),
    default=0.8,
    show_default=True,
    help="Chance that a candidate as good as the baseline PASSes (and one that dropped by twice the margin FAILs).",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Family-wise error of the gate (as `regress --alpha`).",
)
@click.option(
    "--assurance",
    type=click.FloatRange(0.5, 1, max_open=True),
    default=0.8,
    show_default=True,
    help="Chance that a gate of the planned size reaches MDD <= margin, given that the pilot's sd(d) is "
    "itself an estimate: the plan sizes on sd(d)'s one-sided upper bound at this level (0.5: about the point estimate).",
)
@click.option("--system", default=None, help="Candidate system in the pilot.")
@click.option("--baseline-system", default=None, help="Baseline system (in the pilot, or in --baseline).")
@click.option(
    "--judge-calls",
    default="1,2,3",
    show_default=True,
    help="Judge calls per unit to plan for, when the pilot had several judges (comma-separated).",
)
@click.option("--n-boot", type=click.IntRange(200, 100000), default=2000, show_default=True, help="Bootstrap replicates.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
def plan(pilot, baseline, margin, metrics, power, alpha, assurance, system, baseline_system, judge_calls, n_boot, seed):
    """Say how many contexts (and judge calls per unit) a regression gate needs so that its minimum
    detectable drop is within each measure's margin, from a pilot run's paired variance.

    MDD(n) = (t(1-alpha/K, n-1) + t(power, n-1)) x sd(d) / sqrt(n), with sd(d) the per-context standard
    deviation of candidate - baseline; the plan is the smallest n with MDD(n) <= margin when sd(d) is the
    pilot's upper confidence bound at --assurance (the pilot's sd is an estimate too).
    """
    from ..errors import UserError

    try:
        calls = sorted({int(x) for x in judge_calls.split(",") if x.strip()})
    except ValueError:
        raise UserError(f"--judge-calls {judge_calls!r}: give whole numbers, e.g. 1,2,3") from None
    if not calls or min(calls) < 1:
        raise UserError(f"--judge-calls {judge_calls!r}: give whole numbers of at least 1, e.g. 1,2,3")
    res = run_plan(
        pilot,
        baseline=baseline,
        margin=margin,
        metrics=_split(metrics) or None,
        alpha=alpha,
        power=power,
        system=system,
        baseline_system=baseline_system,
        judge_calls=calls,
        n_boot=n_boot,
        seed=seed,
        assurance=assurance,
    )
    total = res.needed
    k = len(res.rows)
    if total is None:
        click.echo(f"PLAN: no number of contexts reaches every margin at {power:.0%} power (widen a margin or drop a measure)")
    else:
        click.echo(
            f"PLAN: a gate on these {k} measure(s) needs {total} contexts per split "
            f"(minimum detectable drop <= margin at {power:.0%} power, family-wise alpha {alpha:g}, "
            f"{assurance:.0%} assurance on the pilot's sd)"
        )
    click.echo(f"pilot: {res.design}")
    click.echo(f"bounds: one-sided at 1 - {alpha:g}/{k} = {1 - res.alpha_each:.4g} each (Bonferroni over {k} measure(s))")
    for n in res.notes:
        click.echo(f"note: {n}")
    head = ["split", "measure", "margin", "pilot n", "sd(d)", "pilot MDD", "sd plan", "on point sd", "contexts needed"]
    with_calls = any(r.needed_by_calls for r in res.rows)
    if with_calls:
        head.append("by judge calls per unit")
    lines = [head]
    for r in res.rows:
        line = [
            r.split,
            r.measure,
            f"{r.margin:g}",
            str(r.pilot_n),
            _fmt(r.sd, r.measure),
            _fmt(r.pilot_mdd, r.measure),
            _fmt(r.sd_plan, r.measure),
            "never" if r.needed_point is None else str(r.needed_point),
            "never" if r.needed is None else str(r.needed),
        ]
        if with_calls:
            line.append(
                ", ".join(
                    f"{c}{'*' if c == r.judge_calls else ''}: {'never' if n is None else n}"
                    for c, n in sorted(r.needed_by_calls.items())
                )
            )
        lines.append(line)
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    out = ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    click.echo("\n".join(out))
    if with_calls:
        click.echo("(* = the pilot's judge calls per unit; more calls shrink only the judges' share of the variance)")
    if total is not None and not math.isinf(total):
        click.echo(f"run the baseline and the candidate with --limit {total} (the same --seed), then `mascot-eval regress`")
