"""`mascot-eval metrics RUN_DIR [--metrics a,b]` and `mascot-eval metrics --list`."""

from __future__ import annotations

import click

from ..errors import UserError


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise UserError("--metrics is empty; pass names such as distinct_2,inter_agent_selfbleu (see `mascot-eval metrics --list`)")
    return names


@click.command()
@click.argument("run_dir", required=False, type=click.Path(file_okay=False))
@click.option("--metrics", "metric_names", default=None, metavar="A,B",
              help="Comma-separated metric names (default: all; see --list).")
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
    from pathlib import Path

    from ..metrics.compute import compute_rundir
    from ..runs.rundir import RunDir

    if not Path(run_dir).is_dir():
        raise UserError(f"{run_dir}: no such run directory")
    rd = RunDir(run_dir)
    df = compute_rundir(rd, _split(metric_names))
    click.echo(system_table(df))
    notes = df.attrs.get("notes", {})
    for reason, n in notes.items():
        click.echo(f"note: {reason} ({n})")
    click.echo(f"metrics: {rd.metrics_path} and {rd.metrics_path.with_suffix('.csv').name} ({len(df)} rows)")
