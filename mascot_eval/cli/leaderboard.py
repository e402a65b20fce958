"""`mascot-eval leaderboard RUN_DIR... --out results/leaderboard.csv [--markdown FILE]`."""

from __future__ import annotations

from pathlib import Path

import click

from ..checks import check_leaderboard_inputs
from ..fileio import atomic_write_text
from ..reports.leaderboard import compact_table, leaderboard_frame, markdown_tables
from ..runs.summary import summarize_data
from ..runs.tables import load_runs


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--out", type=click.Path(dir_okay=False), default=None, help="Write the leaderboard CSV here (one row per system and split)."
)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write paper-style Markdown tables here (agent-/group-level per split, ablations, MBTI x agent heatmaps, model-size sensitivity, beside the published numbers; and how each system's decisions were made).",
)
@click.option(
    "--reference", default=None, help="System the others are tested against (default: mascot if present, else all pairs)."
)
@click.option(
    "--test",
    type=click.Choice(["wilcoxon", "permutation"]),
    default="wilcoxon",
    show_default=True,
    help="Paired test for the significance marks.",
)
@click.option("--n-boot", type=click.IntRange(100, 100000), default=2000, show_default=True, help="Bootstrap replicates.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap/permutation seed.")
def leaderboard(run_dirs, out, markdown_path, reference, test, n_boot, seed):
    """Build a leaderboard from one or more run directories.

    A system evaluated in several runs (e.g. two checkpoints) appears as `system@run-id`.
    """
    rds = check_leaderboard_inputs(run_dirs, out, markdown_path)  # before anything is written
    data = load_runs(rds)
    summary = summarize_data(data, reference=reference, test=test, n_boot=n_boot, seed=seed)
    frame = leaderboard_frame(summary)
    click.echo(compact_table(frame))
    if out:
        atomic_write_text(Path(out), frame.to_csv(index=False))
        click.echo(f"leaderboard: {out} ({len(frame)} rows, {len(frame.columns)} columns)")
    if markdown_path:
        atomic_write_text(Path(markdown_path), markdown_tables(frame, summary, data))
        click.echo(f"markdown: {markdown_path}")
