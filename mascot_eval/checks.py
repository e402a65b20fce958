"""The check phase: validate everything a command will use before anything is created or changed.

Every ``check_*`` function here is pure: it reads files, builds objects and renders templates once
with a sample context, raises :class:`~mascot_eval.errors.UserError` (one line naming the file and
field) on the first problem, and writes nothing (no run directory, no manifest, no cache entry; the
one exception is a dataset file that a loader downloads into the user cache when no data directory
is set and downloads are allowed). A command calls its check first and then works from the returned
plan, so a refused command leaves every file as it was.

For ``run`` / ``generate`` (called by ``cli/run.py`` and ``cli/generate.py``)::

    plan = check_run_inputs(tasks=..., systems=..., judges=..., metrics=..., levels=..., model=...,
                            user_model=..., checkpoint=..., limit=..., data_dir=..., seed=..., out=...)
    # plan.generate.units: one ready System + UserSimulator per task x system (templates rendered once),
    # plan.generate.pairs: the (context, profile) pairs per task, plan.judges / plan.metrics / plan.levels
    check_rundir_compatible(run_dir_path, plan.generate)   # for a run directory chosen after the check

Step commands: :func:`check_judge_inputs`, :func:`check_metrics_inputs`, :func:`check_compare_inputs`,
:func:`check_agreement_inputs`, :func:`check_report_inputs`, :func:`check_leaderboard_inputs`,
:func:`check_human_export_inputs`, :func:`check_out_file`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from .errors import UserError
from .fileio import read_jsonl, stable_hash

if TYPE_CHECKING:
    from .data.context import Context
    from .judges.specs import JudgeSpec
    from .runs.rundir import RunDir
    from .systems.base import System
    from .systems.checkpoint import Checkpoint
    from .systems.user_sim import UserSimulator
    from .taskspec import TaskSpec
    from .transcript import Transcript

Pair = tuple["Context", "str | None"]
LEVELS = ("agent", "group")


# ------------------------------------------------------------------------------------- names / lists


def split_names(values: str | Sequence[str] | None, option: str, *, example: str) -> list[str] | None:
    """``--x a,b`` (or repeated) -> names; None when the option was not given; an option given but empty
    (``--judges ''``, ``--judges ,``) is an error, never the default."""
    if values is None:
        return None
    raw = [values] if isinstance(values, str) else list(values)
    names = [v.strip() for value in raw for v in str(value).split(",") if v.strip()]
    if not names:
        raise UserError(f"{option}: empty; give {example}")
    return names


def check_levels(levels: str | Sequence[str] | None) -> list[str]:
    names = split_names(levels, "--levels", example="agent, group or agent,group") or list(LEVELS)
    for lv in names:
        if lv not in LEVELS:
            raise UserError(f"--levels: unknown level '{lv}'; use agent, group or both")
    return list(dict.fromkeys(names))


def check_model_spec(spec: str, field: str) -> str:
    """A model spec that names a backend and is well formed (the backend object is built; no call)."""
    from .backends.client import make_backend

    try:
        make_backend(spec)
    except UserError as exc:
        raise UserError(f"{field}: {exc.message}") from None
    return spec


def check_metrics(names: list[str] | None) -> list[str] | None:
    """Metric names (None or ['none'] = skip, ['all'] = every registered metric)."""
    from .metrics.compute import resolve_metrics

    if names is None or names == ["none"]:
        return names
    if names != ["all"]:
        if "all" in names or "none" in names:
            raise UserError("--metrics: 'all' and 'none' stand alone; give them without other names")
        resolve_metrics(names)
    return names


# ------------------------------------------------------------------------------------- judges


def sample_transcript(
    agents: Sequence[str] = ("Anchor", "Catalyst", "Beacon"), *, system: str = "sample", context_id: str = "sample"
) -> Transcript:
    """A small made-up dialogue for rendering judge templates once before anything runs."""
    from .transcript import Transcript, Turn, make_dialogue_id

    turns = [Turn(round=1, speaker="user", text="I failed my driving test again and I feel stupid.")]
    turns += [Turn(round=1, speaker=a, text=f"{a}: that sounds discouraging; what happened on the day?") for a in agents]
    return Transcript(
        dialogue_id=make_dialogue_id("sample", context_id, None, system),
        task="sample",
        task_version="1",
        split="in_domain",
        domain="emotional",
        context_id=context_id,
        system=system,
        system_config_hash="-",
        persona_group="-",
        agents=list(agents),
        turns=turns,
        context={"situation": "I failed my driving test again.", "emotion": "ashamed"},
    )


def check_judge(spec: JudgeSpec, *, sample: Transcript | None = None, trio: list[Transcript] | None = None) -> None:
    """A judge's rubrics and every template it uses load from inside ``judges/`` and render once
    with a sample dialogue (no model call)."""
    from .judges import prompts
    from .judges.score import Judge
    from .judges.templates import render
    from .judges.threeway import LABELS, _anonymous_text
    from .judges.validation import pick_best_prompt

    j = Judge(spec)
    t = sample or sample_transcript()
    j.system_prompt()
    render(j.root, spec.templates.reask, nonce="-", reason="(sample reason)")
    if "agent" in j.rubrics:
        for agent in t.agents[:1]:
            j.agent_prompt(t, agent, None)
        j.response_prompt(
            "sample",
            t.agents[0] if t.agents else "Agent",
            "(card)",
            [{"name": x.speaker, "content": x.text} for x in t.turns],
            "(reply)",
        )
    if "group" in j.rubrics:
        j.group_prompt(t, {})
    shown = trio or [t, t, t]
    if shown[0].agents:
        pick_best_prompt(j, shown)
    j.render(
        spec.templates.threeway,
        ["sample"],
        labels=list(LABELS),
        situation=prompts.situation_text(shown[0].context),
        dialogues=[(lab, _anonymous_text(x)) for lab, x in zip(LABELS, shown)],
    )


def check_judges(value: str | Sequence[str], *, sample: Transcript | None = None) -> list[JudgeSpec]:
    """Judge names or model specs -> checked specs (see :func:`check_judge`)."""
    from .judges.specs import parse_judges

    specs = parse_judges(value if isinstance(value, str) else list(value), check=False)
    for s in specs:
        check_judge(s, sample=sample)
    return specs


# ------------------------------------------------------------------------------------- tasks, systems


@dataclass
class Unit:
    """One task x system, ready to generate: templates rendered once, models checked."""

    task: TaskSpec
    system: System
    user: UserSimulator
    config_hash: str
    user_hash: str


@dataclass
class GeneratePlan:
    tasks: list[TaskSpec]
    systems: list[str]
    model: str
    user_model: str
    checkpoint: Checkpoint | None
    data_dir: Path | None
    limit: int | None
    seed: int
    pairs: dict[str, list[Pair]] = field(default_factory=dict)  # task name -> (context, profile), after --limit
    units: list[Unit] = field(default_factory=list)
    # user openers: one call per context and profile, shared by every system's dialogue (paired design)
    shared: Any = field(default=None)

    def expected(self) -> dict[str, tuple[str, int, str]]:
        """dialogue id -> (system config hash, seed, user simulator hash) this plan would write."""
        from .transcript import make_dialogue_id

        out: dict[str, tuple[str, int, str]] = {}
        for u in self.units:
            for ctx, profile in self.pairs[u.task.name]:
                out[make_dialogue_id(u.task.name, ctx.id, profile, u.system.config.name)] = (
                    u.config_hash,
                    self.seed,
                    u.user_hash,
                )
        return out


def user_sim_hash(user: UserSimulator, user_model: str) -> str:
    """The user simulator's identity as generate records it in ``stats.user_sim.hash``."""
    from .systems.user_sim import USER_DECODING

    return stable_hash([user_model, user.template, user.template_hash(), USER_DECODING.model_dump()])


def check_task_contents(
    task: TaskSpec, data_dir: Path | None, limit: int | None, personas_root: str | Path | None = None
) -> list[Pair]:
    """The task's persona group, data (inside the data dir or beside the task), filters and sample."""
    from .data.loaders import load_contexts
    from .data.select import assign_profiles
    from .personas import get_group, load_personas

    where = task.file or task.name
    load_personas(personas_root)  # a broken card or groups file names itself
    try:
        get_group(task.personas, personas_root)
    except UserError as exc:
        raise UserError(f"{where}: field 'personas': {exc.message}") from None
    contexts = load_contexts(task, data_dir, limit=limit)
    pairs = list(assign_profiles(task, contexts))
    if not pairs:
        raise UserError(
            f"{where}: no contexts to generate from (loader '{task.source.loader}', filters "
            f"{task.source.filters or '{}'}); check the filters, --limit and the data dir"
        )
    return pairs


def check_checkpoint(path: str | Path | None) -> Checkpoint | None:
    from .systems.checkpoint import load_checkpoint

    if path is None:
        return None
    text = str(path)
    for mark in ("@http://", "@https://"):  # DIR@URL: the adapters served by that vLLM server
        text = text.split(mark, 1)[0]
    p = Path(text)
    if not p.is_dir():
        raise UserError(f"--checkpoint: {p} is not a folder; pass a trainer output folder (checkpoint.json + adapters)")
    return load_checkpoint(path)


def check_system(
    name: str,
    task: TaskSpec,
    pair: Pair,
    *,
    model: str,
    user_model: str,
    checkpoint: Checkpoint | None,
    personas_root: str | Path | None = None,
    shared: Any = None,
) -> Unit:
    """Build the system for ``task`` and render every template it and the user simulator use once with
    the task's first context; every model spec it resolves is checked."""
    from .systems.engine import new_state
    from .systems.factory import build_system
    from .systems.user_sim import UserSimulator

    system = build_system(name, task, model=model, checkpoint=checkpoint, personas_root=personas_root)
    cfg = system.config
    where = cfg.file or f"system '{cfg.name}'"
    roles = {"agents", "director", "aux", *(c.id for c in system.cards)}
    for role in cfg.models:
        if role not in roles:
            raise UserError(
                f"{where}: field 'models.{role}': unknown role; use agents, director, aux or a persona id "
                f"of the group ({', '.join(c.id for c in system.cards)})"
            )
    for role, spec in system.models.items():
        key = role.split(":", 1)[-1]
        field_name = f"{where}: field 'models.{key}'" if (key in cfg.models or role in cfg.models) else f"{role} model"
        check_model_spec(spec, field_name)
    user = UserSimulator(task, user_model, agents=system.agents, shared=shared)
    probe = new_state(task, pair[0], pair[1], system, seed=0)
    probe.round = 1
    user.preflight(probe)
    system.preflight(probe)
    return Unit(task, system, user, system.config_hash(), user_sim_hash(user, user_model))


def check_generate_inputs(
    *,
    tasks: Sequence[str],
    systems: Sequence[str],
    model: str = "embedded",
    user_model: str | None = None,
    checkpoint: str | Path | None = None,
    limit: int | None = None,
    data_dir: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    personas_root: str | Path | None = None,
) -> GeneratePlan:
    """Everything ``generate`` uses, checked; nothing written. ``out`` (if given and existing) must be a
    run directory whose transcripts came from these settings (see :func:`check_rundir_compatible`)."""
    from .paths import data_dir as resolve_data_dir
    from .taskspec import resolve_tasks

    task_names = split_names(tasks, "--task", example="a task name, task file or suite (see `mascot-eval tasks list`)")
    system_names = split_names(systems, "--system", example="a system name (see `mascot-eval systems list`) or a YAML path")
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1, got {limit}")
    plan = plan_from_specs(
        resolve_tasks(task_names or []),
        system_names or [],
        model=model,
        user_model=user_model,
        checkpoint=checkpoint,
        limit=limit,
        data_dir=resolve_data_dir(data_dir),
        seed=seed,
        personas_root=personas_root,
    )
    if out is not None:
        check_rundir_compatible(Path(out), plan)
    return plan


def plan_from_specs(
    task_specs: Sequence[TaskSpec],
    systems: Sequence[str],
    *,
    model: str = "embedded",
    user_model: str | None = None,
    checkpoint: str | Path | Checkpoint | None = None,
    limit: int | None = None,
    data_dir: Path | None = None,
    seed: int = 0,
    pairs: dict[str, list[Pair]] | None = None,
    personas_root: str | Path | None = None,
) -> GeneratePlan:
    """The generate plan for resolved tasks: every system built and its templates rendered once, every
    model spec checked, the contexts loaded (or taken from ``pairs``, then cut to ``limit``)."""
    from .systems.checkpoint import Checkpoint as _Checkpoint
    from .systems.config import load_system_config

    if not task_specs:
        raise UserError("no task given; pass --task NAME (see `mascot-eval tasks list`)")
    if not systems:
        raise UserError("no system given; pass --system NAME (see `mascot-eval systems list`)")
    system_names = list(dict.fromkeys(systems))
    for name in system_names:
        load_system_config(name)
    check_model_spec(model, "--model")
    user_model = user_model or model
    check_model_spec(user_model, "--user-model")
    ckpt = checkpoint if isinstance(checkpoint, _Checkpoint) else check_checkpoint(checkpoint)
    from .systems.user_sim import SharedTurns

    plan = GeneratePlan(
        tasks=list(task_specs),
        systems=system_names,
        model=model,
        user_model=user_model,
        checkpoint=ckpt,
        data_dir=data_dir,
        limit=limit,
        seed=seed,
        shared=SharedTurns(),
    )
    for task in task_specs:
        if pairs is not None and task.name in pairs:
            plan.pairs[task.name] = list(pairs[task.name])[: limit if limit else None]
            if not plan.pairs[task.name]:
                raise UserError(f"task '{task.name}': no contexts to generate from")
        else:
            plan.pairs[task.name] = check_task_contents(task, data_dir, limit, personas_root)
        for name in system_names:
            plan.units.append(
                check_system(
                    name,
                    task,
                    plan.pairs[task.name][0],
                    model=model,
                    user_model=user_model,
                    checkpoint=ckpt,
                    personas_root=personas_root,
                    shared=plan.shared,
                )
            )
    return plan


def check_rundir_compatible(path: Path, plan: GeneratePlan) -> None:
    """An existing ``path`` must be a run directory (or an empty folder) whose transcripts and tasks
    match ``plan``; a file, a foreign non-empty folder or other settings are refused."""
    from .runs.rundir import RunDir

    if not path.exists():
        return
    if not path.is_dir():
        raise UserError(f"--out: {path} is a file; pass a folder for the run directory")
    rd = RunDir(path)
    has_run_files = rd.manifest_path.exists() or rd.transcripts_path.exists()
    if not has_run_files and any(p.name != ".lock" for p in path.iterdir()):
        raise UserError(
            f"--out: {path} is a non-empty folder that is not a run directory (no manifest.json or "
            "transcripts.jsonl); pick a new or empty folder"
        )
    manifest = rd.read_manifest()
    recorded = manifest.get("tasks") or {}
    for task in plan.tasks:
        info = recorded.get(task.name)
        if (
            isinstance(info, dict)
            and info.get("content_hash")
            and task.content_hash
            and info["content_hash"] != task.content_hash
        ):
            raise UserError(
                f"{rd.manifest_path}: task '{task.name}' was generated from a different task file "
                f"(content hash {info['content_hash']} vs {task.content_hash} now); use a new --out folder"
            )
    want = plan.expected()
    for row in read_jsonl(rd.transcripts_path, what="a transcripts file"):
        did = row.get("dialogue_id")
        if did not in want:
            continue
        got = (
            row.get("system_config_hash"),
            (row.get("seeds") or {}).get("run"),
            ((row.get("stats") or {}).get("user_sim") or {}).get("hash"),
        )
        if got != want[did]:
            raise UserError(
                f"{rd.transcripts_path}: dialogue '{did}' was generated with a different system config, model, user "
                f"simulator or seed (config {got[0]} vs {want[did][0]}, seed {got[1]} vs {want[did][1]}); use a new "
                "--out folder or remove that file"
            )


@dataclass
class RunPlan:
    generate: GeneratePlan
    judge_names: list[str]  # ["none"] = skip
    judges: list[JudgeSpec]
    metrics: list[str]  # ["none"] = skip, ["all"] = every metric
    levels: list[str]


def _task_default(task_specs: list[TaskSpec], what: str) -> list[str]:
    out: list[str] = []
    for t in task_specs:
        for n in t.judging.judges if what == "judges" else t.metrics:
            if n not in out:
                out.append(n)
    return out or ["none"]


def check_run_inputs(
    *,
    tasks: Sequence[str],
    systems: Sequence[str],
    judges: str | None = None,
    metrics: str | None = None,
    levels: str | None = "agent,group",
    model: str = "embedded",
    user_model: str | None = None,
    checkpoint: str | Path | None = None,
    limit: int | None = None,
    data_dir: str | Path | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    personas_root: str | Path | None = None,
) -> RunPlan:
    """Everything ``run`` uses, checked; nothing written. ``judges`` / ``metrics``: the raw option values
    (None = the tasks' defaults, '' = an error, 'none' = skip)."""
    judge_names = split_names(judges, "--judges", example="judge names (gpt, claude, local, ...), model specs or 'none'")
    metric_names = split_names(metrics, "--metrics", example="metric names, 'all' or 'none' (see `mascot-eval metrics --list`)")
    level_list = check_levels(levels)
    gen = check_generate_inputs(
        tasks=tasks,
        systems=systems,
        model=model,
        user_model=user_model,
        checkpoint=checkpoint,
        limit=limit,
        data_dir=data_dir,
        seed=seed,
        out=out,
        personas_root=personas_root,
    )
    judge_names = judge_names or _task_default(gen.tasks, "judges")
    metric_names = metric_names or _task_default(gen.tasks, "metrics")
    specs: list[JudgeSpec] = []
    if judge_names != ["none"]:
        if "none" in judge_names:
            raise UserError("--judges: 'none' stands alone; give it without other judges")
        specs = check_judges(judge_names)
    check_metrics(metric_names)
    return RunPlan(generate=gen, judge_names=judge_names, judges=specs, metrics=metric_names, levels=level_list)


# ------------------------------------------------------------------------------------- run directories

JUDGMENT_KEYS = ("dialogue_id", "judge", "level", "criterion", "status", "system", "task", "split", "context_id", "pair_key")
COMPARISON_KEYS = ("pair_key", "judge", "order", "systems", "status")


def check_rundir(path: str | Path, *, need_transcripts: bool = True) -> tuple[RunDir, list[Transcript]]:
    """An existing run directory with a readable manifest and transcripts (at least one if needed)."""
    from .runs.rundir import RunDir

    p = Path(path)
    if not p.exists():
        raise UserError(f"run directory {p} does not exist; pass a folder written by `mascot-eval run` or `generate`")
    if not p.is_dir():
        raise UserError(f"{p}: is a file; pass a run directory (a folder written by `mascot-eval run` or `generate`)")
    rd = RunDir(p)
    rd.read_manifest()
    ts = rd.transcripts()
    if need_transcripts and not ts:
        if not rd.manifest_path.exists() and not rd.transcripts_path.exists():
            raise UserError(
                f"{p}: not a run directory (no manifest.json, no transcripts.jsonl); pass a folder written "
                "by `mascot-eval run` or `generate`"
            )
        raise UserError(f"{rd.transcripts_path}: no transcripts; run `mascot-eval generate` first")
    return rd, ts


def check_judgments(rd: RunDir) -> list[dict[str, Any]]:
    rows = []
    for i, r in enumerate(read_jsonl(rd.judgments_path, what="a judgments file"), 1):
        missing = [k for k in JUDGMENT_KEYS if k not in r]
        if missing:
            raise UserError(
                f"{rd.judgments_path}:{i}: not a judgment row (missing {', '.join(missing)}); "
                "restore the file or delete it and judge again"
            )
        if r["status"] == "scored" and not isinstance(r.get("score_100"), (int, float)):
            raise UserError(f"{rd.judgments_path}:{i}: a scored row without a numeric score_100; restore the file")
        rows.append(r)
    return rows


def check_comparisons(rd: RunDir) -> list[dict[str, Any]]:
    rows = []
    for i, r in enumerate(read_jsonl(rd.comparisons_path, what="a comparisons file"), 1):
        missing = [k for k in COMPARISON_KEYS if k not in r]
        if missing or not isinstance(r.get("order"), list) or not isinstance(r.get("systems"), list):
            raise UserError(
                f"{rd.comparisons_path}:{i}: not a comparison row (missing or malformed "
                f"{', '.join(missing) or 'order/systems'}); restore the file or delete it and compare again"
            )
        rows.append(r)
    return rows


METRIC_COLUMNS = ("dialogue_id", "pair_key", "system", "task", "split", "metric", "value")


def check_metrics_file(rd: RunDir) -> None:
    """metrics.parquet / metrics.csv, when present, must be readable tables with the metric columns."""
    import pandas as pd

    for path, read in ((rd.metrics_path, pd.read_parquet), (rd.metrics_path.with_suffix(".csv"), pd.read_csv)):
        if not path.exists():
            continue
        try:
            df = read(path)
        except Exception as exc:  # pyarrow / pandas raise many types for a damaged file
            raise UserError(
                f"{path}: not a readable metrics table ({type(exc).__name__}); run `mascot-eval metrics` again"
            ) from None
        missing = [c for c in METRIC_COLUMNS if c not in df.columns]
        if missing:
            raise UserError(f"{path}: missing column(s) {', '.join(missing)}; run `mascot-eval metrics` again")
        return  # the parquet file wins when both exist (as the readers do)


@overload
def check_out_file(out: str | Path, option: str = ...) -> Path: ...
@overload
def check_out_file(out: None, option: str = ...) -> None: ...
def check_out_file(out: str | Path | None, option: str = "--out") -> Path | None:
    """A file the command will write: not a folder, and its parent is not a file."""
    if out is None:
        return None
    p = Path(out)
    if p.is_dir():
        raise UserError(f"{option}: {p} is a folder; give a file name")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{option}: {parent} is a file, so {p} cannot be written")
            break
    return p


def check_out_dir(out: str | Path | None, option: str = "--out") -> Path | None:
    if out is None:
        return None
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UserError(f"{option}: {p} is a file; give a folder")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{option}: {parent} is a file, so {p} cannot be created")
            break
    return p


# ------------------------------------------------------------------------------------- step commands


@dataclass
class JudgePlan:
    rundir: RunDir
    transcripts: list[Transcript]
    judges: list[JudgeSpec]
    levels: list[str]


def check_judge_inputs(run_dir: str | Path, judges: str, levels: str | None) -> JudgePlan:
    rd, ts = check_rundir(run_dir)
    level_list = check_levels(levels)
    check_judgments(rd)
    specs = check_judges(
        split_names(judges, "--judges", example="judge names (gpt, claude, local, ...) or model specs") or [], sample=ts[0]
    )
    return JudgePlan(rd, ts, specs, level_list)


def check_metrics_inputs(run_dir: str | Path, metrics: str | None) -> tuple[RunDir, list[str] | None]:
    rd, _ = check_rundir(run_dir)
    names = split_names(
        metrics, "--metrics", example="metric names such as distinct_2,inter_agent_selfbleu (see `mascot-eval metrics --list`)"
    )
    if names == ["all"]:
        names = None
    check_metrics(names)
    return rd, names


@dataclass
class ComparePlan:
    rundirs: list[RunDir]
    transcripts: list[Transcript]
    judges: list[JudgeSpec]
    systems: list[str] | None
    out: Path | None


def check_compare_inputs(run_dirs: Sequence[str | Path], judges: str, systems: str | None, out: str | Path | None) -> ComparePlan:
    from .judges.threeway import load_for_compare, shared_trios

    rds = [check_rundir(p)[0] for p in run_dirs]
    for rd in rds:
        check_comparisons(rd)
    names = split_names(systems, "--systems", example="exactly three system names")
    if names is not None and len(names) != 3:
        raise UserError(f"--systems: give exactly three names, got {len(names)}")
    out_path = check_out_dir(out)
    if out_path is not None and out_path.exists() and any(out_path.iterdir()):
        out_rd = check_rundir(out_path, need_transcripts=False)[0]
        if not any(p.exists() for p in (out_rd.manifest_path, out_rd.transcripts_path, out_rd.comparisons_path)):
            raise UserError(
                f"--out: {out_path} is a non-empty folder that is not a run directory; pick a new or "
                "empty folder, or a run directory"
            )
        check_comparisons(out_rd)
    ts = load_for_compare(rds)
    _, trios = shared_trios(list(ts), names)
    sample = trios[0] if trios else None
    specs = parse_judge_list(judges)
    for s in specs:
        check_judge(s, sample=sample[0] if sample else None, trio=sample)
    return ComparePlan(rds, ts, specs, names, out_path)


def parse_judge_list(judges: str) -> list[JudgeSpec]:
    from .judges.specs import parse_judges

    names = split_names(judges, "--judges", example="judge names (gpt, claude, local, ...) or model specs") or []
    return parse_judges(names, check=False)


@dataclass
class AgreementPlan:
    rundir: RunDir
    rows: list[dict[str, Any]]
    human: list[dict[str, Any]] | None


def check_agreement_inputs(run_dir: str | Path, judges: str | None, human: str | Path | None) -> AgreementPlan:
    from .judges.human import load_human
    from .judges.run import latest_judgments

    rd, _ = check_rundir(run_dir)
    rows = latest_judgments(check_judgments(rd))
    keep = split_names(judges, "--judges", example="judge names as they appear in judgments.jsonl")
    if keep is not None:
        known = {r["judge"] for r in rows}
        unknown = [j for j in keep if j not in known]
        if unknown:
            raise UserError(
                f"--judges: {', '.join(unknown)} not in {rd.judgments_path} (judges there: {', '.join(sorted(known)) or 'none'})"
            )
        rows = [r for r in rows if r["judge"] in set(keep)]
    if not rows:
        raise UserError(f"{rd.judgments_path}: no judgments; run `mascot-eval judge {run_dir} --judges ...` first")
    check_comparisons(rd)
    h = load_human(human) if human else None
    return AgreementPlan(rd, rows, h)


def check_report_inputs(run_dirs: Sequence[str | Path], out: str | Path | None) -> list[RunDir]:
    """Every run directory holds transcripts and readable judgments, comparisons and metrics."""
    if not run_dirs:
        raise UserError("give at least one run directory")
    rds = []
    for p in run_dirs:
        rd, _ = check_rundir(p)
        check_judgments(rd)
        check_comparisons(rd)
        check_metrics_file(rd)
        rds.append(rd)
    check_out_file(out)
    return rds


def check_leaderboard_inputs(run_dirs: Sequence[str | Path], out: str | Path | None, markdown: str | Path | None) -> list[RunDir]:
    rds = check_report_inputs(run_dirs, None)
    check_out_file(out, "--out")
    check_out_file(markdown, "--markdown")
    return rds


def check_human_export_inputs(run_dirs: Sequence[str | Path], out: str | Path, levels: str | None) -> list[RunDir]:
    rds = [check_rundir(p)[0] for p in run_dirs]
    check_levels(levels)
    check_out_dir(out)
    return rds
