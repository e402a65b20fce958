"""`mascot-eval generate`: write transcripts for tasks x systems into a run directory (resumable)."""

from __future__ import annotations

from pathlib import Path

import click

from .options import client_options, pop_client_options


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


@click.command()
@click.option("--task", "tasks", multiple=True, default=("demo",), show_default=True,
              help="Task name, task file or suite (in-domain, ood, all); repeat or comma-separate.")
@click.option("--system", "systems", multiple=True, default=("mascot",), show_default=True,
              help="System name (baselines/<name>.yaml or a registered kind) or a YAML path; repeat or comma-separate.")
@click.option("--model", default="embedded", show_default=True,
              help="Model spec for every role a system does not set itself (embedded, hf/..., openai/..., ...).")
@click.option("--user-model", default=None, help="Model spec of the simulated user (default: --model).")
@click.option("--checkpoint", type=click.Path(file_okay=False), default=None,
              help="Trainer output folder (checkpoint.json + LoRA adapters) for mascot, its ablations and sft.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Use only the first N contexts of each task.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory (default: results/runs/<new run id>); rerunning into it fills only what is missing.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Dataset folder (default: $MASCOT_DATA_DIR).")
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed; every sampled call derives its seed from it.")
@click.option("--no-progress", is_flag=True, default=False, help="Do not show the progress bar.")
@client_options
def generate(tasks, systems, model, user_model, checkpoint, limit, out, data_dir, seed, no_progress, **kw) -> None:
    """Generate dialogues (transcripts.jsonl) for each task x system into a run directory.

    Example: mascot-eval generate --task demo --system mascot,zero-shot --limit 4 --out results/runs/try
    """
    from ..errors import UserError
    from ..paths import data_dir as resolve_data_dir
    from ..runs.rundir import RunDir
    from ..systems.generate import generate as run_generate
    from ..taskspec import resolve_tasks

    settings = pop_client_options(kw)
    task_specs = resolve_tasks(_split(tasks))
    system_names = _split(systems)
    ddir = resolve_data_dir(data_dir)
    rundir = RunDir(Path(out), create=True) if out else RunDir.default()
    try:
        res = run_generate(rundir, task_specs, system_names, model=model, checkpoint=checkpoint, limit=limit,
                           data_dir=ddir, settings=settings, seed=seed, progress=not no_progress, user_model=user_model)
    except UserError as exc:
        partial = getattr(exc, "generate_result", None)
        if partial is not None:
            click.echo(f"stopped: {partial.new} new dialogue(s) saved, {partial.reused} reused; rerun to resume "
                       f"({rundir.path})", err=True)
        _cleanup_if_empty(rundir, created=out is None)
        raise
    click.echo(
        f"{res.new} new, {res.reused} reused, {res.failed} failed dialogue(s) in {res.seconds:.1f}s "
        f"({res.calls} calls, {res.tokens} tokens, ${res.cost_usd:.4f}) -> {rundir.transcripts_path}"
    )
    for f in res.failures[:5]:
        click.echo(f"failed: {f['dialogue_id']}: {f['error']}", err=True)
    if res.failed:
        raise SystemExit(1)


def _cleanup_if_empty(rundir, *, created: bool) -> None:
    """A run directory this command created and that holds nothing is removed (nothing half-written)."""
    if created and rundir.path.is_dir() and not rundir.transcripts_path.exists():
        for p in rundir.path.iterdir():
            if p.name == "manifest.json":
                p.unlink()
        try:
            rundir.path.rmdir()
        except OSError:
            pass
