"""`mascot-eval sweep --vary director-model=A,B --vary speaker-model=C,D`: one run per combination.

Each combination is an ordinary `mascot-eval run` (same flags, same resumable run directory,
``OUT/<combination>/``). The Director's and the speakers' models are set through a copy of each
system's YAML with its ``models:`` entries replaced (``OUT/_systems/<combination>/<system>.yaml``,
templates found as for the original), so every run's manifest records which model played which
role. Afterwards the sweep writes ``OUT/sweep.json`` (the combinations and their run directories),
``OUT/sensitivity.csv`` and ``OUT/sensitivity.md``: our model-size sensitivity table (group- and
agent-level Overall, mean ± std, 95% interval, n per run) beside the paper's digitised values
(``results/paper/size_sensitivity.csv``). Rerunning the same command resumes every run.
"""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path
from typing import Any

import click

from .options import client_options

# --vary key -> where the value goes: a system models: role, or a run flag
VARY_KEYS = {
    "director-model": ("models", "director"),
    "speaker-model": ("models", "agents"),
    "model": ("flag", "model"),
    "user-model": ("flag", "user_model"),
}


def parse_vary(values: tuple[str, ...]) -> dict[str, list[str]]:
    from ..errors import UserError, did_you_mean

    out: dict[str, list[str]] = {}
    for v in values:
        if "=" not in v:
            raise UserError(f"--vary {v!r}: write KEY=VALUE1,VALUE2 with KEY one of {', '.join(VARY_KEYS)}")
        key, vals = v.split("=", 1)
        key = key.strip()
        if key not in VARY_KEYS:
            raise UserError(f"--vary: unknown key '{key}'{did_you_mean(key, list(VARY_KEYS))}; use one of {', '.join(VARY_KEYS)}")
        if key in out:
            raise UserError(f"--vary {key} is given twice; list all its values once, comma-separated")
        specs = [s.strip() for s in vals.split(",") if s.strip()]
        if not specs:
            raise UserError(f"--vary {key}=: give at least one value")
        out[key] = list(dict.fromkeys(specs))
    if not out:
        raise UserError("sweep needs at least one --vary KEY=VALUE1,VALUE2 (e.g. --vary director-model=embedded,hf/PATH)")
    return out


def combinations(vary: dict[str, list[str]]) -> list[dict[str, str]]:
    keys = list(vary)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(vary[k] for k in keys))]


def combo_slug(combo: dict[str, str]) -> str:
    from ..fileio import stable_hash

    parts = [f"{k.split('-')[0]}={re.sub(r'[^A-Za-z0-9._-]+', '-', v).strip('-')[-40:]}" for k, v in combo.items()]
    return ("_".join(parts))[:150] + "-" + stable_hash(combo)[:6]


def derived_system(name: str, combo: dict[str, str], folder: Path) -> str:
    """A copy of system ``name``'s YAML with the varied roles' models set; returns its path."""
    import yaml

    from ..errors import UserError
    from ..fileio import atomic_write_text
    from ..paths import baselines_dir
    from ..systems.config import load_system_config
    from ..systems.templates import search_path

    cfg = load_system_config(name)
    roles = {VARY_KEYS[k][1]: v for k, v in combo.items() if VARY_KEYS[k][0] == "models"}
    if "director" in roles and cfg.kind != "mascot":
        raise UserError(f"--vary director-model: system '{cfg.name}' (kind {cfg.kind}) has no Director; sweep mascot systems")
    if not roles:
        return name
    data = cfg.model_dump(mode="json", exclude_none=True)
    data["models"] = {**data.get("models", {}), **roles}
    folder.mkdir(parents=True, exist_ok=True)
    # templates of a system file outside baselines/ travel with the copy (baselines/templates is always searched)
    shipped = (baselines_dir() / "templates").resolve()
    for d in reversed(search_path(cfg.file)):
        if d.resolve() == shipped or not d.is_dir():
            continue
        for t in d.glob("*.j2"):
            (folder / "templates").mkdir(exist_ok=True)
            shutil.copyfile(t, folder / "templates" / t.name)
    path = folder / f"{cfg.name}.yaml"
    atomic_write_text(
        path, "# written by `mascot-eval sweep` from " + str(cfg.file or cfg.name) + "\n" + yaml.safe_dump(data, sort_keys=False)
    )
    return str(path)


@click.command()
@click.option(
    "--vary",
    "vary",
    multiple=True,
    required=True,
    help="KEY=V1,V2 with KEY director-model, speaker-model (the system's models: director / agents), "
    "model or user-model; repeat for a grid of every combination.",
)
@click.option("--task", "tasks", multiple=True, default=("demo",), show_default=True, help="As for `run`.")
@click.option("--system", "systems", multiple=True, default=("mascot",), show_default=True, help="As for `run`.")
@click.option("--judges", default=None, help="As for `run`.")
@click.option("--metrics", "metric_names", default=None, help="As for `run`.")
@click.option("--levels", default="agent,group", show_default=True, help="As for `run`.")
@click.option("--model", default="embedded", show_default=True, help="Model of every role not varied (as for `run`).")
@click.option("--user-model", default=None, help="As for `run`.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="As for `run`.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    required=True,
    help="Sweep folder: one run directory per combination, sweep.json, sensitivity.csv/.md.",
)
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="As for `run`.")
@click.option("--seed", type=int, default=0, show_default=True, help="As for `run`.")
@click.option("--n-boot", type=click.IntRange(100, 100000), default=2000, show_default=True, help="Bootstrap replicates.")
@click.option("--no-report", is_flag=True, default=False, help="Skip each run's HTML report.")
@click.option("--no-progress", is_flag=True, default=False, help="Do not show progress.")
@client_options
@click.pass_context
def sweep(
    ctx,
    vary,
    tasks,
    systems,
    judges,
    metric_names,
    levels,
    model,
    user_model,
    limit,
    out,
    data_dir,
    seed,
    n_boot,
    no_report,
    no_progress,
    **kw,
) -> None:
    """Compose runs over model choices (the paper's model-size study) and tabulate them.

    \b
    Example (the paper's Director-size study, speakers fixed):
      mascot-eval sweep --vary director-model=hf/Qwen3-0.6B,hf/Qwen3-1.7B,hf/Qwen3-8B \\
        --vary speaker-model=hf/Qwen3-8B --judges gpt --out results/sweeps/director-size
    """
    from ..fileio import atomic_write_json, atomic_write_text
    from ..reports.leaderboard import sensitivity_markdown
    from ..runs.tables import load_runs
    from ..stats.figures import records, sensitivity_table
    from ..checks import split_names
    from .run import run

    v = parse_vary(vary)
    combos = combinations(v)
    root = Path(out)
    system_names = split_names(systems, "--system", example="a system name (see `mascot-eval systems list`)") or []
    plan = []
    for combo in combos:
        slug = combo_slug(combo)
        derived = [derived_system(s, combo, root / "_systems" / slug) for s in system_names]  # fails before any run
        plan.append((combo, slug, derived))
    results: list[dict[str, Any]] = []
    failed = 0
    for i, (combo, slug, derived) in enumerate(plan, 1):
        click.echo(f"\n== sweep {i}/{len(plan)}: " + ", ".join(f"{k}={val}" for k, val in combo.items()), err=True)
        flags = {VARY_KEYS[k][1]: val for k, val in combo.items() if VARY_KEYS[k][0] == "flag"}
        status = "complete"
        try:
            ctx.invoke(
                run,
                tasks=tasks,
                systems=tuple(derived),
                judges=judges,
                metric_names=metric_names,
                levels=levels,
                model=flags.get("model", model),
                user_model=flags.get("user_model", user_model),
                checkpoint=None,
                limit=limit,
                out=str(root / slug),
                data_dir=data_dir,
                seed=seed,
                reference=None,
                test="wilcoxon",
                n_boot=n_boot,
                no_report=no_report,
                no_progress=no_progress,
                **kw,
            )
        except SystemExit as exc:  # some dialogues failed: the run is saved; the sweep goes on
            if exc.code not in (0, None):
                status, failed = "complete_with_failures", failed + 1
        results.append({"combination": combo, "run_dir": str(root / slug), "systems": derived, "status": status})
    atomic_write_json(root / "sweep.json", {"schema": "mascot-sweep/1", "vary": v, "runs": results})
    data = load_runs([r["run_dir"] for r in results])
    table = sensitivity_table(data, n_boot=n_boot, seed=seed)
    atomic_write_text(root / "sensitivity.csv", table.to_csv(index=False))
    md = sensitivity_markdown(table)
    atomic_write_text(root / "sensitivity.md", md)
    atomic_write_json(root / "sensitivity.json", {"ours": records(table)})
    click.echo("\n" + md)
    click.echo(f"sweep: {len(results)} runs in {root}; sensitivity.csv, sensitivity.md, sweep.json")
    if failed:
        click.echo(f"{failed} run(s) had failed dialogues; rerun the same command to retry them", err=True)
        raise SystemExit(1)
