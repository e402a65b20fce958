"""`mascot-eval cache stats|clear`: the shared response cache (SQLite, WAL) of every model backend."""

from __future__ import annotations

import json

import click

_CACHE_DIR = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Response cache folder (default: $MASCOT_RESPONSE_CACHE_DIR, else the user cache).",
)


@click.group()
def cache() -> None:
    """Inspect or empty the model response cache."""


@cache.command("stats")
@_CACHE_DIR
@click.option("--json", "as_json", is_flag=True, default=False, help="Print JSON.")
def stats_cmd(cache_dir: str | None, as_json: bool) -> None:
    """Rows, size and rows per model spec of the response cache (read-only: writes nothing)."""
    from ..backends.cache import read_stats, response_cache_dir

    st = read_stats(response_cache_dir(cache_dir, create=False))
    if as_json:
        click.echo(json.dumps(st, indent=2))
        return
    note = "" if st["exists"] else " (not created yet; the first run creates it)"
    if "unreadable" in st:
        note = f" (unreadable: {st['unreadable']}; the next run moves it aside and starts a fresh cache)"
    click.echo(f"cache: {st['path']}{note}")
    click.echo(f"rows: {st['rows']}  size: {st['bytes'] / 1e6:.2f} MB")
    for spec, n in st["by_model"].items():
        click.echo(f"  {n:>8}  {spec}")


@cache.command("clear")
@_CACHE_DIR
@click.option("--model", "spec", default=None, help="Delete only this model spec's rows (its LoRA variants too).")
@click.option("--yes", "-y", is_flag=True, default=False, help="Do not ask for confirmation.")
def clear_cmd(cache_dir: str | None, spec: str | None, yes: bool) -> None:
    """Delete cached responses (all, or one model's); the next run calls the models again."""
    from ..backends.cache import FILENAME, open_cache, response_cache_dir

    folder = response_cache_dir(cache_dir)
    path = folder / FILENAME
    if not path.is_file():
        click.echo(f"cache: {path} does not exist; nothing to clear")
        return
    what = f"the rows of '{spec}'" if spec else "every row"
    if not yes and not click.confirm(f"Delete {what} from {path}?", default=False):
        raise click.exceptions.Abort()
    n = open_cache(folder).clear(spec)
    click.echo(f"deleted {n} row{'s' if n != 1 else ''} from {path}")
