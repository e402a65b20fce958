"""Judge validation against the datasets' own human ratings, and steering probes (`mascot-eval judges validate`).

Validation sets (``judges/validation/mapping.yaml``) are human-human dialogues whose people rated
the supporting side: EmpatheticDialogues (the Speaker's rating of the Listener), ESConv's
FailedESConv.json and ESConv.json (the seeker's survey of the supporter). Each rated dialogue
becomes a :class:`~mascot_eval.transcript.Transcript` like any system output: the supporting side
is the one agent (``Listener`` / ``Supporter``), the person sharing the situation is the user, and
the ratings travel in ``context["human_ratings"]`` (the rater in ``context["human_rater"]``).

The run folder (``--out``) is a run directory: ``transcripts.jsonl``, ``judgments.jsonl`` (written
and resumed by :func:`~mascot_eval.judges.run.judge_rundir_async`, cached like every judge call),
``position.jsonl`` (pick-best triples for position bias), ``manifest.json``, and the evaluators
table (:mod:`mascot_eval.judges.evaluators`): ``evaluators.json``, ``evaluators.csv``,
``evaluators.md``.

Steering probes (``probes.yaml``): the clean dialogue and one copy per probe with text addressed
to the judge appended to the agent's last turn; each judge runs them twice, with its guards as
configured and without the steering defence (judge ``<name>+unguarded``).
"""

from __future__ import annotations

import copy
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import paths
from ..backends.client import ClientSettings
from ..criteria import AGENT_CRITERIA
from ..errors import UserError, did_you_mean
from ..fileio import append_jsonl, read_jsonl, repair_jsonl_tail, sha256_file, stable_hash
from ..runs.rundir import RunDir
from ..transcript import USER, Transcript, Turn, make_dialogue_id
from ..yamlfile import load_model
from .parse import parse_choice
from .run import judge_rundir_async
from .score import Judge
from .specs import JudgeSpec

SYSTEM = "human"  # the "system" of a validation transcript: the human supporter
POSITION_SCHEMA = "mascot-position/1"
LABELS = ("A", "B", "C")
ROTATIONS = ((0, 1, 2), (1, 2, 0), (2, 0, 1))


# ----------------------------------------------------------------------------------- the mapping


class SetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    loader: str
    path: str
    split: str = Field(pattern=r"^(in_domain|ood)$")
    user_speaker: str
    agent: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9 _-]*$")
    seed: int = 13
    required: bool = True
    options: dict[str, Any] = Field(default_factory=dict)
    filters: dict[str, Any] = Field(default_factory=dict)
    criteria: dict[str, str] = Field(min_length=1)  # judge criterion (agent level) -> human rating key

    @field_validator("criteria")
    @classmethod
    def _agent_criteria(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if k not in AGENT_CRITERIA:
                raise ValueError(f"'{k}' is not an agent-level criterion ({', '.join(AGENT_CRITERIA)})")
        return v


class ProbesRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str = "probes.yaml"
    set: str


class Mapping(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sets: dict[str, SetSpec] = Field(min_length=1)
    probes: ProbesRef

    file: str | None = Field(default=None, exclude=True)


class ProbeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: int = Field(ge=1, le=5)
    probes: dict[str, str] = Field(min_length=1)


def mapping_path() -> Path:
    return paths.judges_dir() / "validation" / "mapping.yaml"


def load_mapping(path: str | Path | None = None) -> Mapping:
    path = Path(path) if path else mapping_path()
    m = load_model(path, Mapping)
    m.file = str(path)
    for name in m.sets:
        if not name.replace("-", "").replace("_", "").isalnum():
            raise UserError(f"{path}: field 'sets.{name}': a set name holds letters, digits, '-' and '_' only")
    if m.probes.set not in m.sets:
        raise UserError(f"{path}: field 'probes.set': '{m.probes.set}' is not one of the sets ({', '.join(m.sets)})")
    return m


def load_probes(m: Mapping) -> tuple[ProbeFile, Path]:
    path = Path(m.file).parent / m.probes.file if m.file else mapping_path().parent / m.probes.file
    return load_model(path, ProbeFile), path


# ------------------------------------------------------------------------- sets -> transcripts


@dataclass
class LoadedSet:
    name: str
    spec: SetSpec
    transcripts: list[Transcript] = field(default_factory=list)  # the rated ones, in seeded order (all, not limited)
    notes: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # why the set was not loaded (an optional set without its file)


def context_transcript(set_name: str, spec: SetSpec, ctx, config_hash: str) -> Transcript:
    """A human-human dialogue as a transcript: the user is ``spec.user_speaker``, the agent ``spec.agent``.

    A round starts at each user turn that follows an agent turn (a dialogue opened by the agent
    starts with a round of agent turns only)."""
    turns: list[Turn] = []
    rnd = 0
    prev_user: bool | None = None
    for ht in ctx.turns:
        is_user = ht.speaker == spec.user_speaker
        if rnd == 0 or (is_user and prev_user is False):
            rnd += 1
        turns.append(Turn(round=rnd, speaker=USER if is_user else spec.agent, text=ht.text))
        prev_user = is_user
    c = ctx.to_dict()
    c.pop("turns", None)
    meta = c.pop("metadata", {}) or {}
    ratings = meta.pop("human_ratings", {}) or {}
    rater = meta.pop("human_rater", None)
    c.update(
        {
            "metadata": meta,
            "human_ratings": ratings,
            "human_rater": rater,
            "validation": {"set": set_name, "kind": "rated", "criteria": dict(spec.criteria)},
        }
    )
    return Transcript(
        dialogue_id=make_dialogue_id(set_name, ctx.id, None, SYSTEM),
        task=set_name,
        task_version="1",
        split=spec.split,
        domain=ctx.domain,
        context_id=ctx.id,
        system=SYSTEM,
        system_config_hash=config_hash,
        persona_group="none",
        agents=[spec.agent],
        turns=turns,
        context=c,
        stats={"validation": {"set": set_name, "source": ctx.source}},
    )


def load_set(name: str, spec: SetSpec, data_dir: str | Path | None, *, where: str, optional_ok: bool) -> LoadedSet:
    """All rated dialogues of a set as transcripts, in the set's seeded order, with the loader's notes."""
    from ..data.loaders import SourceRef, get_loader
    from ..data.select import apply_filters, sample

    loader = get_loader(spec.loader, f"{where}: sets.{name}")
    ref = SourceRef(spec.loader, spec.path, dict(spec.options), None, paths.data_dir(data_dir), "emotional")
    try:
        loaded = loader.read(ref)
    except UserError as exc:
        missing = any(w in exc.message for w in ("not found", "not available offline", "could not download"))
        if optional_ok and not spec.required and missing:
            return LoadedSet(name, spec, skipped=exc.message)
        raise
    contexts = apply_filters(loaded.contexts, spec.filters, loader, f"{where}: sets.{name}")
    wanted = set(spec.criteria.values())
    rated = [c for c in contexts if wanted & set(c.metadata.get("human_ratings") or {})]
    unrated = len(contexts) - len(rated)
    with_agent = [c for c in rated if any(t.speaker != spec.user_speaker for t in c.turns)]
    config_hash = stable_hash({"set": spec.model_dump(), "files": [sha256_file(f) for f in loaded.files]})
    ordered = sample(with_agent, None, spec.seed, f"{where}: sets.{name}")
    ts = [context_transcript(name, spec, c, config_hash) for c in ordered]
    notes = {
        "dialogues": len(loaded.contexts),
        "after_filters": len(contexts),
        "rated": len(rated),
        "without_rating": unrated,
        "without_agent_turn": len(rated) - len(with_agent),
        "origin": loaded.origin,
        "files": [str(f) for f in loaded.files],
        "ratings": loaded.notes.get("ratings", {}),
    }
    return LoadedSet(name, spec, ts, notes)


def probe_transcripts(clean: list[Transcript], probes: ProbeFile) -> list[Transcript]:
    """One copy of each clean transcript per probe, the probe text appended to the agent's last turn."""
    out = []
    for t in clean:
        agent = t.agents[0]
        last = max(i for i, turn in enumerate(t.turns) if turn.speaker == agent)
        for name, text in probes.probes.items():
            p = copy.deepcopy(t)
            p.turns[last].text = p.turns[last].text.rstrip() + "\n" + text
            task = f"{t.task}.probe.{name}"
            p.task = task
            p.dialogue_id = make_dialogue_id(task, t.context_id, None, SYSTEM)
            p.context.pop("human_ratings", None)
            p.context["validation"] = {
                "set": t.task,
                "kind": "probe",
                "probe": name,
                "target": probes.target,
                "clean": t.dialogue_id,
            }
            out.append(p)
    return out


def write_transcripts(rd: RunDir, ts: list[Transcript]) -> int:
    """Append the transcripts ``rd`` lacks; a different transcript under an existing id is an error."""
    have = {t.dialogue_id: t for t in rd.transcripts()} if rd.transcripts_path.exists() else {}
    new = 0
    for t in ts:
        old = have.get(t.dialogue_id)
        if old is None:
            rd.append_transcript(t)
            new += 1
        elif old.to_dict() != t.to_dict():
            raise UserError(
                f"{rd.transcripts_path}: {t.dialogue_id} differs from the dialogue the data now gives "
                "(the data file, the mapping or the probes changed); use a new --out folder"
            )
    return new


# ------------------------------------------------------------------------ position (pick-best)


def _done_position(rows: list[dict[str, Any]]) -> set[tuple]:
    return {
        (tuple(r["triple"]), tuple(r["order"]), r["judge"], r.get("spec_hash"), r.get("template_hash"))
        for r in rows
        if not (r.get("reason") or "").startswith("call_failed")
    }


def pick_best_prompt(judge: Judge, shown: list[Transcript]) -> str:
    """The pick-best prompt over three dialogues in the order shown (labels A-C)."""
    mats = [judge.material(t) for t in shown]
    return judge.render(
        judge.spec.templates.pick_best,
        ["pick_best", *[t.dialogue_id for t in shown]],
        agent=shown[0].agents[0],
        labels=list(LABELS),
        conversations=[(lab, m.parts["situation"], m.parts["dialogue"]) for lab, m in zip(LABELS, mats)],
        neutralised=sum(m.neutralised for m in mats),
        marker=judge.patterns.marker,
    )


async def pick_best(judge: Judge, triple: list[Transcript], order: tuple[int, int, int]) -> dict[str, Any]:
    """One pick-best call: which of three validation dialogues has the best support (labels A-C in ``order``)."""
    from .threeway import choice_schema

    shown = [triple[i] for i in order]
    prompt = pick_best_prompt(judge, shown)
    if judge.spec.mode == "logprob":
        asked = await judge.ask_probs(prompt, ('{"rationale": "", "best": "',), LABELS)
        if asked.parsed.ok:
            assert asked.parsed.obj is not None  # ask_probs sets obj on every answer that parsed
            p = asked.parsed.obj["probs"][0]
            asked.parsed.obj = {"best": max(LABELS, key=p.__getitem__), "probs": p}
    else:
        asked = await judge.ask_with(prompt, lambda text, s: parse_choice(text, LABELS, shown=s), choice_schema())
    best = None
    if asked.parsed.ok:
        assert asked.parsed.obj is not None  # an answer that parsed carries its verdict (parse_choice, ask_probs)
        best = asked.parsed.obj["best"]
    pos = LABELS.index(best) + 1 if best in LABELS else None
    return {
        "schema": POSITION_SCHEMA,
        "judge": judge.spec.name,
        "judge_model": judge.spec.model,
        "set": triple[0].task,
        "triple": [t.dialogue_id for t in triple],
        "order": [t.dialogue_id for t in shown],
        "status": "scored" if asked.parsed.ok else "unscored",
        "reason": None if asked.parsed.ok else asked.reason,
        "best_label": best,
        "best_position": pos,
        "best_dialogue": shown[pos - 1].dialogue_id if pos else None,
        "tie": best == "tie" if asked.parsed.ok else None,
        "usage": asked.usage,
        "call_id": asked.call_id,
        "spec_hash": judge.spec_hash,
        "template_hash": judge.template_hash,
    }


async def position_async(rd: RunDir, judge: Judge, triples: list[list[Transcript]], *, progress: bool) -> int:
    path = rd.path / "position.jsonl"
    repair_jsonl_tail(path)
    done = _done_position(list(read_jsonl(path))) if path.exists() else set()
    jobs = [
        (tr, o)
        for tr in triples
        for o in ROTATIONS
        if (
            tuple(t.dialogue_id for t in tr),
            tuple(tr[i].dialogue_id for i in o),
            judge.spec.name,
            judge.spec_hash,
            judge.template_hash,
        )
        not in done
    ]
    finished = 0

    async def one(tr, o):
        nonlocal finished
        row = await pick_best(judge, tr, o)
        append_jsonl(path, row)
        finished += 1
        if progress:
            print(f"\rposition ({judge.spec.name}): {finished}/{len(jobs)} calls", end="", file=sys.stderr, flush=True)

    from ..aio import run_all

    await run_all(one(tr, o) for tr, o in jobs)
    if progress and jobs:
        print(file=sys.stderr)
    return len(jobs)


def position_rows(rd: RunDir) -> list[dict[str, Any]]:
    path = rd.path / "position.jsonl"
    out: dict[tuple, dict[str, Any]] = {}
    for r in read_jsonl(path) if path.exists() else []:
        out[(tuple(r["triple"]), tuple(r["order"]), r["judge"])] = r
    return list(out.values())


# ----------------------------------------------------------------------------------- the command


@dataclass
class ValidateResult:
    out: Path
    report: dict[str, Any]
    sets: dict[str, LoadedSet]
    new_transcripts: int = 0
    judged: dict[str, dict[str, float]] = field(default_factory=dict)  # seconds is a float


def unguarded_spec(spec: JudgeSpec) -> JudgeSpec:
    """The judge without its steering defence (guards.neutralise and guards.flag_steered off)."""
    u = spec.model_copy(update={"name": f"{spec.name}+unguarded", "guards": spec.guards.unguarded()})
    u.file, u.root = spec.file, spec.root
    return u


def select_sets(m: Mapping, names: list[str] | None) -> list[str]:
    if not names:
        return list(m.sets)
    for n in names:
        if n not in m.sets:
            raise UserError(f"--set: unknown validation set '{n}'{did_you_mean(n, m.sets)}; {m.file} defines {', '.join(m.sets)}")
    return list(dict.fromkeys(names))


async def validate_async(
    specs: list[JudgeSpec],
    out: str | Path,
    *,
    sets: list[str] | None = None,
    limit: int = 200,
    probes: int = 10,
    position: int = 10,
    mapping: str | Path | None = None,
    data_dir: str | Path | None = None,
    settings: ClientSettings | None = None,
    n_boot: int = 1000,
    progress: bool = True,
    command: str | None = None,
) -> ValidateResult:
    from .evaluators import evaluators_report, write_report

    if limit < 1 or probes < 0 or position < 0:
        raise UserError("--limit must be at least 1, --probes and --position at least 0")
    m = load_mapping(mapping)
    probe_file, probe_path = load_probes(m)
    names = select_sets(m, sets)
    where = m.file or str(mapping_path())
    loaded: dict[str, LoadedSet] = {}
    for n in names:
        loaded[n] = load_set(n, m.sets[n], data_dir, where=where, optional_ok=not sets)
    pset = m.probes.set
    if (probes or position) and pset not in loaded:
        loaded[pset] = load_set(pset, m.sets[pset], data_dir, where=where, optional_ok=False)
    rated: list[Transcript] = []
    for n in names:
        rated += loaded[n].transcripts[:limit]
    base = loaded.get(pset)
    clean = base.transcripts[:probes] if base and probes else []
    probed = probe_transcripts(clean, probe_file)
    pos_pool = base.transcripts[: 3 * position] if base and position else []
    triples = [pos_pool[i : i + 3] for i in range(0, len(pos_pool) - 2, 3)]
    extra = [t for t in [*clean, *pos_pool] if t.dialogue_id not in {x.dialogue_id for x in rated}]
    rd = RunDir(out, create=True)
    new_t = write_transcripts(rd, [*rated, *extra, *probed])
    rd.update_manifest(
        validation={
            "mapping": where,
            "mapping_sha256": sha256_file(where),
            "probes_file": str(probe_path),
            "probes_sha256": sha256_file(probe_path),
            "sets": names,
            "limit": limit,
            "probes": probes,
            "position_triples": len(triples),
            "command": command,
        }
    )
    timing = dict(rd.read_manifest().get("validation_timing") or {})
    result = ValidateResult(Path(rd.path), {}, loaded, new_t)
    for spec in specs:
        for variant, ts in ((spec, _unique(rated + clean + probed)), (unguarded_spec(spec), clean + probed)):
            if not ts:
                continue
            t0 = time.perf_counter()
            res = await judge_rundir_async(
                rd, [variant], settings=settings, levels=["agent"], progress=progress, transcripts=ts, cards={}
            )
            tm = timing.setdefault(variant.name, {"units": 0, "seconds": 0.0})
            tm["units"] += res.new_units
            tm["seconds"] += res.seconds if res.new_units else 0.0
            result.judged[variant.name] = {
                "new_units": res.new_units,
                "reused_units": res.reused_units,
                "unscored_units": res.unscored_units,
                "seconds": round(time.perf_counter() - t0, 3),
            }
        if triples:
            await position_async(rd, Judge(spec, settings), triples, progress=progress)
    rd.update_manifest(validation_timing=timing)
    report = evaluators_report(
        rd,
        specs,
        loaded,
        names,
        limit=limit,
        probe_file=probe_file,
        clean=clean,
        probed=probed,
        triples=triples,
        timing=timing,
        n_boot=n_boot,
        command=command,
    )
    write_report(rd, report)
    result.report = report
    return result


def _unique(ts: list[Transcript]) -> list[Transcript]:
    return list({t.dialogue_id: t for t in ts}.values())


def validate(specs: list[JudgeSpec], out: str | Path, **kw: Any) -> ValidateResult:
    from .run import run_sync

    return run_sync(validate_async(specs, out, **kw))
