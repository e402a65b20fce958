"""`mascot-eval human export|import`: blinded human-evaluation sheets and their ratings."""

from __future__ import annotations

from pathlib import Path

import click

RATINGS_FILE = "human_ratings.jsonl"  # what `human import` writes next to the first sheet; `agreement --human` reads it


@click.group()
def human() -> None:
    """Human evaluation with the judges' rubric: export blinded sheets, import filled ones."""


@human.command("export")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Folder for sheet.csv, form.html, rubric.md, key.json.",
)
@click.option("--levels", default="agent,group", show_default=True, help="agent, group or both.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N dialogues (after shuffling).")
@click.option("--seed", type=int, default=0, show_default=True, help="Shuffle seed.")
def export_cmd(run_dirs, out_dir, levels, limit, seed) -> None:
    """Write blinded annotation sheets (CSV + self-contained HTML form) for the runs' transcripts.

    Systems are hidden and dialogues shuffled; key.json maps items back. Keep key.json away from
    annotators; send them form.html (or sheet.csv with rubric.md).
    """
    from ..checks import check_human_export_inputs, check_levels
    from ..judges.human import export

    rds = check_human_export_inputs(run_dirs, out_dir, levels)
    res = export(rds, out_dir, levels=tuple(check_levels(levels)), limit=limit, seed=seed)
    click.echo(
        f"wrote {res.items} items from {res.dialogues} dialogues to {res.out_dir} "
        "(sheet.csv, form.html, rubric.md; key.json stays with you)"
    )


@human.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--key", type=click.Path(dir_okay=False), default=None, help="key.json from export (default: next to each file).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help=f"Where to write the ratings as judgment rows (default: {RATINGS_FILE} next to the first file).",
)
def import_cmd(files, key, out) -> None:
    """Read filled sheets (one or more annotators) back; print inter-annotator agreement.

    Use the output with `mascot-eval agreement RUN_DIR --human human/human_ratings.jsonl`.
    """
    from ..checks import check_out_file
    from ..judges.agreement import agreement_table
    from ..judges.human import annotators, import_ratings, save_ratings

    target = check_out_file(out or Path(files[0]).parent / RATINGS_FILE)
    rows = import_ratings(list(files), key=key)  # every sheet read and checked before the ratings are written
    path = save_ratings(rows, target)
    ann = annotators(rows)
    click.echo(
        f"imported {len(rows)} ratings from {len(ann)} annotator(s) ({', '.join(f'{a}: {n}' for a, n in sorted(ann.items()))}) -> {path}"
    )
    t = agreement_table(rows)
    if t.empty:
        click.echo("inter-annotator agreement: needs at least two annotators rating the same items")
        return
    click.echo("inter-annotator Krippendorff alpha (interval) [95% CI], n items:")
    for _, r in t[t.statistic == "alpha_interval"].iterrows():
        click.echo(f"  {r.level:5s} {r.criterion:12s} {r.value:+.3f} [{r.lo:+.3f}, {r.hi:+.3f}] n={r.n_items}")
