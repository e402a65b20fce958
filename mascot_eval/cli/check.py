"""`mascot-eval check`: validate everything `run` would use, without running or writing anything."""

from __future__ import annotations

import click


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
    help="System name (see `mascot-eval systems list`) or a YAML path; repeat or comma-separate.",
)
@click.option("--judges", default=None, help="Comma-separated judges or 'none' (default: the task files' judges).")
@click.option(
    "--metrics",
    "metric_names",
    default=None,
    help="Comma-separated metric names, 'all' or 'none' (default: the task files' metrics).",
)
@click.option("--levels", default="agent,group", show_default=True, help="Judge rubrics: agent, group or both.")
@click.option("--model", default="embedded", show_default=True, help="Model spec for every role a system does not set.")
@click.option("--user-model", default=None, help="Model spec of the simulated user (default: --model).")
@click.option("--checkpoint", type=click.Path(file_okay=False), default=None, help="Trainer output folder.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N contexts of each task.")
@click.option("--out", type=click.Path(), default=None, help="Run directory the run would use (checked, not created).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Dataset folder (default: $MASCOT_DATA_DIR).")
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed.")
def check(tasks, systems, judges, metric_names, levels, model, user_model, checkpoint, limit, out, data_dir, seed) -> None:
    """Check a run's inputs without running it: task files and their data, persona groups, system
    configs and their templates (rendered once with each task's first context), every model spec,
    judges with their rubrics and templates, metrics, the checkpoint and an existing --out folder.

    Takes the same options as `mascot-eval run`. Prints what the run would do and exits 0, or prints
    one line naming the file and field and exits 2. Writes nothing; no model is called.
    """
    from ..checks import check_run_inputs

    plan = check_run_inputs(
        tasks=tasks,
        systems=systems,
        judges=judges,
        metrics=metric_names,
        levels=levels,
        model=model,
        user_model=user_model,
        checkpoint=checkpoint,
        limit=limit,
        data_dir=data_dir,
        seed=seed,
        out=out,
    )
    g = plan.generate
    dialogues = sum(len(g.pairs[u.task.name]) for u in g.units)
    for t in g.tasks:
        click.echo(
            f"task {t.name}: {len(g.pairs[t.name])} dialogues (context x profile), {t.rounds} rounds, personas {t.personas}"
        )
    for u in g.units:
        if u.task is g.tasks[0]:
            click.echo(
                f"system {u.system.config.name} ({u.system.kind}): templates "
                f"{', '.join(u.system.used_templates())}; models {', '.join(sorted(set(u.system.models.values())))}"
            )
    click.echo(f"user simulator: {g.user_model}" + (f"; checkpoint {g.checkpoint.dir}" if g.checkpoint else ""))
    click.echo(
        f"judges: {', '.join(s.name for s in plan.judges) or 'none'} ({', '.join(plan.levels)}); "
        f"metrics: {', '.join(plan.metrics)}"
    )
    click.echo(f"ok: {dialogues} dialogues to generate; nothing was written")
