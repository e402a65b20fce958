"""`mascot-eval systems list|show`: the systems that `generate` and `run` can evaluate."""

from __future__ import annotations

import click


@click.group()
def systems() -> None:
    """List and inspect systems (baselines/*.yaml configs and registered system kinds)."""


@systems.command("list")
def list_cmd() -> None:
    """List named systems (baselines/*.yaml) and the system kinds they build on.

    SOURCE: user (the user folder's baselines/, overriding a shipped config of the same name),
    checkout or package (the shipped configs), builtin (a registered kind with its default config).
    """
    from .. import paths
    from ..systems import SYSTEMS
    from ..systems.config import load_config_file, system_files

    rows = [["NAME", "KIND", "CHECKPOINT", "SOURCE", "DESCRIPTION"]]
    names = set()
    for name, path in system_files().items():
        cfg = load_config_file(path)
        names.add(name)
        rows.append([name, cfg.kind, ",".join(cfg.checkpoint) or "-", paths.source_of(path), cfg.description])
    for kind, cls in SYSTEMS.items():
        if kind not in names:
            doc = (cls.__doc__ or "").strip().splitlines()
            rows.append([kind, kind, "-", "builtin", f"(kind, default config) {doc[0] if doc else ''}".strip()])
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    click.echo(paths.describe())


@systems.command("show")
@click.argument("name")
@click.option("--task", default="demo", show_default=True, help="Task whose persona group the system is built for.")
@click.option("--model", default="embedded", show_default=True, help="Default model spec.")
@click.option("--checkpoint", type=click.Path(file_okay=False), default=None, help="Checkpoint folder to resolve models against.")
def show_cmd(name: str, task: str, model: str, checkpoint: str | None) -> None:
    """Print a system's config, agents, templates, model per role and config hash."""
    import yaml

    from ..systems.checkpoint import load_checkpoint
    from ..systems.factory import build_system
    from ..taskspec import load_task

    spec = load_task(task)
    system = build_system(name, spec, model=model, checkpoint=load_checkpoint(checkpoint) if checkpoint else None)
    cfg = system.config
    click.echo(f"system: {cfg.name} (kind {system.kind}){'  file: ' + cfg.file if cfg.file else ''}")
    if cfg.description:
        click.echo(f"description: {cfg.description}")
    click.echo(f"agents ({system.group}): {', '.join(system.agents)}")
    click.echo(f"templates: {', '.join(str(system.templates.path(t)) for t in system.used_templates())}")
    click.echo("models:")
    for role, m in system.models.items():
        click.echo(f"  {role}: {m}")
    click.echo(f"config hash (task {spec.name}): {system.config_hash()}")
    click.echo("config:")
    click.echo(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True), sort_keys=False).rstrip())
