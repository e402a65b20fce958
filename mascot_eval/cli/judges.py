"""`mascot-eval judges validate`: each judge against the datasets' own human ratings, and its steering resistance."""

from __future__ import annotations

import shlex

import click

from .options import client_options, settings_from_options


@click.group()
def judges() -> None:
    """Judges themselves: how well they agree with people, and whether they can be steered."""


def _f(v, signed: bool = True) -> str:
    if v is None:
        return "  -  "
    return f"{v:+.2f}" if signed else f"{v:.2f}"


@judges.command("validate")
@click.option(
    "--judges", "judge_names", required=True, help="Comma-separated judge names (gpt, claude, local, ...) or model specs."
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    help="Validation set (repeatable; default: every set in the mapping, optional ones skipped when their file is missing).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=200, show_default=True, help="Rated dialogues per set (a seeded prefix)."
)
@click.option(
    "--probes",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Dialogues of the probe set to run the steering probes on (0: none).",
)
@click.option(
    "--position",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Pick-best triples (each asked in 3 rotations) for position bias (0: none).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Run folder for transcripts, judgments and the evaluators table (default: results/judges/validation). "
    "Rerun with the same folder to resume.",
)
@click.option(
    "--mapping",
    type=click.Path(dir_okay=False),
    default=None,
    help="Sets and criterion <-> human rating mapping (default: judges/validation/mapping.yaml).",
)
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Dataset folder (default: MASCOT_DATA_DIR).")
@click.option("--n-boot", type=click.IntRange(min=100), default=1000, show_default=True, help="Bootstrap replicates.")
@click.option("--progress/--no-progress", default=True, show_default=True)
@client_options
def validate_cmd(judge_names, sets, limit, probes, position, out_dir, mapping, data_dir, n_boot, progress, **kw) -> None:
    """Judge the human-rated validation sets (EmpatheticDialogues selfeval, ESConv seeker surveys) with
    each judge's agent-level rubric and write the evaluators table: per judge and criterion n, Spearman,
    Kendall, Krippendorff's alpha (ordinal), exact and within-1 agreement and bias against the human
    rating, each with a bootstrap interval; unscored rate; length and position bias; price and seconds
    per 1,000 dialogues; and the steering probes' susceptibility with and without the judge's defence.

    Writes OUT/evaluators.{json,csv,md} and OUT/steering.csv; resumable and cached like every judge call.
    """
    from .. import paths
    from ..judges.specs import parse_judges
    from ..judges.validation import validate

    specs = parse_judges(judge_names)
    out = out_dir or str(paths.results_dir() / "judges" / "validation")
    args = [
        "judges",
        "validate",
        "--judges",
        judge_names,
        *[x for s in sets for x in ("--set", s)],
        "--limit",
        str(limit),
        "--probes",
        str(probes),
        "--position",
        str(position),
        "--out",
        out,
    ]
    args += ["--mapping", mapping] if mapping else []
    args += ["--n-boot", str(n_boot)] if n_boot != 1000 else []
    command = "mascot-eval " + " ".join(shlex.quote(a) for a in args)
    res = validate(
        specs,
        out,
        sets=list(sets) or None,
        limit=limit,
        probes=probes,
        position=position,
        mapping=mapping,
        data_dir=data_dir,
        settings=settings_from_options(**kw),
        n_boot=n_boot,
        progress=progress,
        command=command,
    )
    rep = res.report
    for name, s in rep["sets"].items():
        if s.get("skipped"):
            click.echo(f"set {name}: not run ({s['skipped']})")
            continue
        rt = (s.get("notes") or {}).get("ratings") or {}
        kinds = ", ".join(f"{k} {v}" for k, v in (rt.get("skipped_by_kind") or {}).items())
        click.echo(
            f"set {name}: {s['selected']} of {s['available']} rated dialogues judged; rating values skipped: "
            f"{rt.get('skipped', 0)} of {rt.get('values', 0)}{' (' + kinds + ')' if kinds else ''}"
        )
    for j, st in res.judged.items():
        click.echo(f"judge {j}: {st['new_units']} new calls ({st['unscored_units']} unscored), {st['reused_units']} reused")
    click.echo("\nAgreement with the human ratings: value [95% CI], n")
    for r in rep["criteria"]:
        click.echo(
            f"  {r['judge']:14s} {r['value']:14s} {r['set']:14s} {r['criterion']:10s} n={r['n']:<4d} "
            f"spearman {_f(r['spearman'])} [{_f(r['spearman_lo'])}, {_f(r['spearman_hi'])}]  "
            f"kendall {_f(r['kendall'])}  alpha {_f(r['alpha_ordinal'])}  exact {_f(r['exact'], False)}  "
            f"within1 {_f(r['within1'], False)}  bias {_f(r['bias'])}"
        )
    for r in rep["position"]:
        if r["picks"]:
            click.echo(
                f"position {r['judge']}: first-position rate {_f(r['first_rate'], False)} "
                f"[{_f(r['first_rate_lo'], False)}, {_f(r['first_rate_hi'], False)}] of {r['picks']} picks (1/3 = none)"
            )
    for r in rep["steering"]:
        if r["probe"] == "all":
            click.echo(
                f"steering {r['judge']}: susceptibility {_f(r.get('susceptibility'), False)} "
                f"[{_f(r.get('susceptibility_lo'), False)}, {_f(r.get('susceptibility_hi'), False)}] "
                f"({r['obeyed']} of {r['eligible']} probed dialogues fully obeyed; {r['unscored']} left unscored by the guards)"
            )
    click.echo(f"\nwrote {res.out}/evaluators.md, evaluators.csv, evaluators.json{', steering.csv' if rep['steering'] else ''}")
