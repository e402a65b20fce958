"""`mascot-eval metrics RUN_DIR [--metrics a,b]` and `mascot-eval metrics --list`."""

from __future__ import annotations

import click

from ..errors import UserError


@click.command()
@click.argument("run_dir", required=False, type=click.Path(file_okay=False))
@click.option(
    "--metrics", "metric_names", default=None, metavar="A,B", help="Comma-separated metric names (default: all; see --list)."
)
@click.option("--list", "list_only", is_flag=True, help="List the metrics (name, unit, definition) and exit.")
def metrics(run_dir, metric_names, list_only):
    """Compute automatic metrics for RUN_DIR's transcripts.

    Writes RUN_DIR/metrics.parquet and RUN_DIR/metrics.csv (long format: one row per metric value,
    with dialogue_id, system, task, agent, round, unit), records them in the manifest and prints the
    mean of each metric per system. Embedding metrics use the bundled MiniLM model (cached per text).
    """
    from ..metrics.table import list_table, system_table

    if list_only:
        click.echo(list_table())
        return
    if run_dir is None:
        raise UserError("metrics: pass RUN_DIR (a run directory with transcripts.jsonl), or --list to see the metrics")
    from ..checks import check_metrics_inputs
    from ..metrics.compute import compute_rundir

    rd, names = check_metrics_inputs(run_dir, metric_names)  # run dir, manifest, transcripts, names: before writing
    df = compute_rundir(rd, names)
    click.echo(system_table(df))
    notes = df.attrs.get("notes", {})
    for reason, n in notes.items():
        click.echo(f"note: {reason} ({n})")
    click.echo(f"metrics: {rd.metrics_path} and {rd.metrics_path.with_suffix('.csv').name} ({len(df)} rows)")
