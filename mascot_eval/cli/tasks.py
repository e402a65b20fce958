"""`mascot-eval tasks list|show|validate`: the task files in tasks/ and the contexts they load."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..errors import UserError

DATA_DIR_HELP = "folder holding the datasets (default: $MASCOT_DATA_DIR; unset: user cache, downloaded when absent)"


def _fmt_stats(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(
            f"{k} {_fmt_stats(v)}" if not isinstance(v, dict) else f"{k} ({_fmt_stats(v)})" for k, v in value.items()
        )
    return str(value)


def _short(text: str, n: int = 150) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _filters(task) -> str:
    f = task.source.filters
    return ",".join(f"{k}={v}" for k, v in f.items()) or "-"


@click.group()
def tasks() -> None:
    """List, inspect and validate task files (tasks/*.yaml) and the contexts they load."""


@tasks.command("list")
def list_cmd() -> None:
    """List the task files in tasks/ with their split, domain, loader, sample and where each comes from.

    SOURCE is the layer a task file comes from: user (the user folder, $MASCOT_HOME or
    ~/.config/mascot-eval), checkout (a source checkout's tasks/) or package (the installed package's
    data). A user task overrides a shipped one of the same name; the last line shows the search order.
    """
    from .. import paths
    from ..taskspec import load_task_file, task_files

    files = task_files()
    if not files:
        raise UserError(f"no task files found; add tasks/*.yaml to a user folder (MASCOT_HOME). {paths.describe()}")
    rows = [["NAME", "SPLIT", "DOMAIN", "LOADER", "FILTERS", "SAMPLE", "SEED", "PERSONAS", "ROUNDS", "PROFILES", "SOURCE"]]
    for path in files.values():
        t = load_task_file(path)
        profiles = t.user.profiles
        prof = "mbti16" if len(profiles) == 16 else ",".join(profiles)
        rows.append(
            [
                t.name,
                t.split,
                t.domain,
                t.source.loader,
                _filters(t),
                str(t.sample.size) if t.sample.size else "all",
                str(t.sample.seed),
                t.personas,
                str(t.rounds),
                f"{prof} ({t.user.assignment})",
                paths.source_of(path),
            ]
        )
    click.echo(_table(rows))
    click.echo(paths.describe())


@tasks.command("show")
@click.argument("name")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help=DATA_DIR_HELP)
@click.option(
    "-n", "--contexts", "n", type=click.IntRange(0, 100), default=3, show_default=True, help="how many sample contexts to print"
)
def show_cmd(name: str, data_dir: str | None, n: int) -> None:
    """Print a task (NAME or path) and its first sample contexts.

    Writes nothing: a dataset that is not in the data folder or the user cache is not downloaded;
    the command says so (the first run downloads it).
    """
    import yaml

    from ..data.loaders import load_contexts
    from ..data.sources import DownloadNeeded, no_downloads
    from ..data.select import assign_profiles
    from ..personas import get_group
    from ..taskspec import load_task

    task = load_task(name)
    try:
        _, cards = get_group(task.personas)
    except UserError as exc:
        raise UserError(f"{task.file}: field 'personas': {exc.message}") from None
    try:
        with no_downloads():
            contexts = load_contexts(task, data_dir)
    except DownloadNeeded as exc:
        contexts, missing = None, exc.message
    click.echo(f"# {task.file} (sha256 {task.content_hash})")
    click.echo(
        yaml.safe_dump(
            task.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
        ).rstrip()
    )
    click.echo(f"# personas: {', '.join(f'{c.name} ({c.role})' for c in cards)}")
    if contexts is None:
        click.echo(f"# contexts: not loaded: {missing}")
        return
    pairs = assign_profiles(task, contexts)
    click.echo(f"# contexts: {len(contexts)} sampled, {len(pairs)} dialogues (context x profile)")
    for ctx, profile in pairs[:n]:
        click.echo("")
        tags = [
            f"{k}={v}"
            for k, v in (
                ("domain", ctx.domain),
                ("emotion", ctx.emotion),
                ("valence", ctx.valence),
                ("problem", ctx.problem),
                ("meeting", ctx.meeting_domain),
                ("user", profile),
            )
            if v
        ]
        click.echo(f"[{ctx.id}] {' '.join(tags)}")
        click.echo(f"  situation: {_short(ctx.situation, 300)}")
        if ctx.query and ctx.query != ctx.situation:
            click.echo(f"  query: {_short(ctx.query)}")
        if ctx.participants:
            click.echo(f"  participants: {_short(', '.join(ctx.participants))}")
        for turn in ctx.turns[:4]:
            click.echo(f"  {turn.speaker}: {_short(turn.text)}")
        if len(ctx.turns) > 4:
            click.echo(f"  ... {len(ctx.turns) - 4} more turns")


def _expand(paths: tuple[str, ...]) -> list[Path]:
    from ..taskspec import task_files

    if not paths:
        return list(task_files().values())
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = list(task_files(p).values())
            if not found:
                raise UserError(f"{p}: no *.yaml task files in this folder")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            from ..taskspec import load_task

            out.append(Path(load_task(str(p)).file or p))  # a task name; unknown names fail with a hint
    return out


@tasks.command("validate")
@click.argument("paths", nargs=-1)
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help=DATA_DIR_HELP)
def validate_cmd(paths: tuple[str, ...], data_dir: str | None) -> None:
    """Validate task files (default: every tasks/*.yaml): schema, persona group, loader, filters, data.

    Loads every source and prints context counts per task, per source file and per split. Any problem
    is one line naming the file and field; the exit code is then 2. Nothing is written, except that
    without a data folder a dataset missing from the user cache is downloaded into it first.
    """
    from ..data.check import check_task, split_counts
    from ..taskspec import load_task_file

    files = _expand(paths)
    if not files:
        raise UserError("no task files to validate; pass PATH... or add tasks/*.yaml")
    checks, errors = [], []
    for f in files:
        try:
            checks.append(check_task(load_task_file(f), data_dir))
        except UserError as exc:
            errors.append(exc.message)
    if checks:
        rows = [["TASK", "SPLIT", "DOMAIN", "LOADER", "FILTERS", "MATCH", "CONTEXTS", "DIALOGUES", "PERSONAS"]]
        for c in checks:
            t = c.task
            rows.append(
                [
                    t.name,
                    t.split,
                    t.domain,
                    t.source.loader,
                    _filters(t),
                    str(c.available),
                    str(c.sampled),
                    str(c.dialogues),
                    ", ".join(c.personas),
                ]
            )
        click.echo(_table(rows))
        click.echo("\nsources:")
        seen: set[tuple[str, ...]] = set()
        for c in checks:
            key = (c.task.source.loader, *map(str, c.source_files))
            if key in seen:
                continue
            seen.add(key)
            quirks = c.notes.get("quirks")
            extra = f"; raw-format quirks handled: {_fmt_stats(quirks)}" if quirks else ""
            click.echo(f"  {c.task.source.loader} [{c.origin}]: {_fmt_stats(c.source_stats)}{extra}")
            click.echo(f"    files: {', '.join(map(str, c.source_files))}")
        click.echo("\nper split:")
        for split, agg in split_counts(checks).items():
            click.echo(f"  {split}: {agg['tasks']} tasks, {agg['contexts']} contexts, {agg['dialogues']} dialogues")
    for msg in errors:
        click.echo(f"error: {msg}", err=True)
    if errors:
        sys.exit(2)
    click.echo(f"\nok: {len(checks)} task file(s) valid")
