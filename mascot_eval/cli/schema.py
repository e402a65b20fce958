"""`mascot-eval schema [NAME] [--out DIR]`: the JSON Schemas of the run artifacts."""

from __future__ import annotations

import json

import click

from ..errors import UserError, did_you_mean


@click.command()
@click.argument("name", required=False)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Write one <name>.schema.json per record into this folder instead of printing.",
)
def schema(name: str | None, out: str | None) -> None:
    """Print (or write) the JSON Schema of a run artifact record.

    NAME is one of transcript, judgment, comparison, metric, summary, manifest; without NAME, every
    record is listed with its schema id (and, with --out, all are written).
    """
    from pathlib import Path

    from ..fileio import atomic_write_json
    from ..records import RECORDS, json_schema

    if name is not None and name not in RECORDS:
        raise UserError(f"unknown record '{name}'{did_you_mean(name, RECORDS)}; records: {', '.join(RECORDS)}")
    names = [name] if name else list(RECORDS)
    if out:
        for n in names:
            atomic_write_json(Path(out) / f"{n}.schema.json", json_schema(n))
        click.echo(f"wrote {len(names)} schema(s) to {out}")
    elif name:
        click.echo(json.dumps(json_schema(name), indent=2, sort_keys=True))
    else:
        for n, (cls, schema_id) in RECORDS.items():
            doc = (cls.__doc__ or "").strip().splitlines()
            click.echo(f"{n:11s} {schema_id:22s} {doc[0] if doc else ''}")
