"""`mascot-eval generate`: write transcripts for tasks x systems into a run directory (resumable)."""

from __future__ import annotations

from pathlib import Path

import click

from .options import client_options, pop_client_options


@click.command()
@click.option(
    "--task",
    "tasks",
    multiple=True,
    default=("demo",),
    show_default=True,
    help="Task name, task file or suite (in-domain, ood, all); repeat or comma-separate.",
)
@click.option(
    "--system",
    "systems",
    multiple=True,
    default=("mascot",),
    show_default=True,
    help="System name (baselines/<name>.yaml or a registered kind) or a YAML path; repeat or comma-separate.",
)
@click.option(
    "--model",
    default="embedded",
    show_default=True,
    help="Model spec for every role a system does not set itself (embedded, hf/..., openai/..., ...).",
)
@click.option("--user-model", default=None, help="Model spec of the simulated user (default: --model).")
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False),
    default=None,
    help="Trainer output folder (checkpoint.json + LoRA adapters) for mascot, its ablations and sft.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Use only the first N contexts of each task.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Run directory (default: results/runs/<new run id>); rerunning into it fills only what is missing.",
)
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Dataset folder (default: $MASCOT_DATA_DIR).")
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed; every sampled call derives its seed from it.")
@click.option("--no-progress", is_flag=True, default=False, help="Do not show the progress bar.")
@client_options
def generate(tasks, systems, model, user_model, checkpoint, limit, out, data_dir, seed, no_progress, **kw) -> None:
    """Generate dialogues (transcripts.jsonl) for each task x system into a run directory.

    Example: mascot-eval generate --task demo --system mascot,zero-shot --limit 4 --out results/runs/try
    """
    from ..aio import run_sync
    from ..checks import check_generate_inputs
    from ..errors import UserError
    from ..runs.rundir import RunDir
    from ..systems.generate import agenerate

    settings = pop_client_options(kw)
    if out:
        RunDir.planned(Path(out)).check_not_locked()
    plan = check_generate_inputs(
        tasks=tasks,
        systems=systems,
        model=model,
        user_model=user_model,
        checkpoint=checkpoint,
        limit=limit,
        data_dir=data_dir,
        seed=seed,
        out=out,
    )  # before anything is written
    rundir = RunDir.planned(Path(out)) if out else RunDir.default(create=False)
    try:
        res = run_sync(agenerate(rundir, [], [], plan=plan, settings=settings, progress=not no_progress))
    except UserError as exc:
        partial = getattr(exc, "generate_result", None)
        if partial is not None:
            click.echo(
                f"stopped: {partial.new} new dialogue(s) saved, {partial.reused} reused; rerun to resume ({rundir.path})",
                err=True,
            )
        raise
    click.echo(
        f"{res.new} new, {res.reused} reused, {res.failed} failed dialogue(s) in {res.seconds:.1f}s "
        f"({res.calls} calls, {res.usage.retries} retries, {res.tokens} tokens, ${res.cost_usd:.4f}) -> {rundir.transcripts_path}"
    )
    for f in res.failures[:5]:
        click.echo(f"failed: {f['id']}: {f['error']}", err=True)
    if res.failed:
        raise SystemExit(1)
