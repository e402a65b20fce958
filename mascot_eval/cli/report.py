"""`mascot-eval report RUN_DIR... [--out FILE]`: the self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import click

from ..checks import check_report_inputs
from ..errors import UserError
from ..reports.html import render_report


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="HTML file to write (default: RUN_DIR/report.html for one run; required for several).",
)
@click.option(
    "--reference", default=None, help="System the others are tested against (default: mascot if present, else all pairs)."
)
@click.option("--test", type=click.Choice(["wilcoxon", "permutation"]), default="wilcoxon", show_default=True)
@click.option("--n-boot", type=click.IntRange(100, 100000), default=2000, show_default=True, help="Bootstrap replicates.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--max-transcripts",
    type=click.IntRange(0, 100000),
    default=300,
    show_default=True,
    help="Transcripts included in the browser (the rest are counted).",
)
@click.option("--title", default=None, help="Report title.")
def report(run_dirs, out, reference, test, n_boot, seed, max_transcripts, title):
    """Write an HTML report (tables, charts, judge agreement, transcripts) for one or more runs."""
    if out is None and len(run_dirs) > 1:
        raise UserError("several run directories: pass --out FILE for the combined report")
    rds = check_report_inputs(run_dirs, out)  # every run dir holds transcripts and readable results: before writing
    if out is None:
        out = rds[0].report_path
    path = render_report(
        rds, Path(out), reference=reference, test=test, n_boot=n_boot, seed=seed, max_transcripts=max_transcripts, title=title
    )
    click.echo(f"report: {path}")
