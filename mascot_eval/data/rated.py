"""Human-rated dialogues for judge validation: EmpatheticDialogues ``selfeval`` and ESConv seeker surveys.

Two loaders (registered in :data:`~mascot_eval.data.loaders.LOADERS`):

``empathetic_dialogues_rated``
    The EmpatheticDialogues test CSV (parsed exactly as ``empathetic_dialogues``) with the
    ``selfeval`` column read as ratings. ``selfeval`` is ``a|b|c_d|e|f``: two rating triples, one
    per crowd worker, given at the end of the conversation (the same string on every row of a
    conversation). Order within a triple: **empathy, relevance, fluency** ("understandability"),
    stated by the dataset's maintainer (E. M. Smith, facebookresearch/EmpatheticDialogues issue #21,
    2020: "human ratings of empathy, relevance, and understandability ... in that order ... ratings
    from two different people per line, separated by an underscore"); the ED paper (Rashkin et al.,
    ACL 2019) does not describe the column. Who wrote which triple is documented nowhere; the
    release itself answers it: attributing the *first* triple to the Speaker (the worker who wrote
    the situation) and the second to the Listener makes a worker's own ratings consistent across
    the conversations they took part in (worker identity explains 36% of rating variance, against
    23% for the opposite attribution, which equals random attribution: 23% [20%, 26%]), and a
    worker's free-text quirk recurs in the second triple exactly when that worker was the Listener
    (worker 153, "Is good", conversations hit:444_conv:889 and hit:597_conv:1195). The free-text
    values also speak of the partner ("they were kind of aloof and cold"), so each worker rated
    the *other*: the first triple is the Speaker's rating of the Listener, the one a judge of the
    listener is checked against (``human_ratings``); the second, the Listener's rating of the
    Speaker, is kept in metadata.
``esconv_rated``
    ESConv dialogues in the raw release format (``FailedESConv.json``, ``ESConv.json``): turns by
    ``speaker``/``seeker`` (the help-seeker) and ``listener``/``supporter``; ``survey_score.seeker``
    holds the seeker's own ratings of the supporter, ``empathy`` and ``relevance`` (1-5), and the
    emotion intensity before and after (kept in metadata with the per-turn ``feedback``).

A rating value that is not exactly one of ``1``-``5`` (free text, ``55``, ``4"``, ``6``, empty,
``5 ``) is never guessed: it is skipped, and every skipped value is counted by kind and listed in
the loader's notes (``notes["ratings"]``), which ``mascot-eval judges validate`` reports.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..fileio import atomic_write_bytes
from .context import Context, HumanTurn
from .ed import EmpatheticDialoguesLoader
from .loaders import LOADERS, LoadedSource, Loader, SourceRef
from .sources import DOWNLOADERS, ESCONV_COMMIT, ESCONV_RAW, fetch, git_blob_id, locate

ED_DIMENSIONS = ("empathy", "relevance", "fluency")
ED_RATERS = ("speaker", "listener")  # writer of the first and of the second triple; each rates the other
VALID = {"1", "2", "3", "4", "5"}


def classify(raw: str) -> str | None:
    """None for a valid rating ("1".."5" exactly), else the kind of noise (a counted skip, never a guess)."""
    if raw in VALID:
        return None
    if raw == "":
        return "empty"
    if raw.strip() in VALID:
        return "whitespace"
    if raw.isdigit():
        return "multi_digit" if len(raw) > 1 else "out_of_range"
    if re.search(r"[A-Za-z]", raw):
        return "free_text"
    return "other_characters"


class RatingLog:
    """Every rating value read from a source: counts of valid values and of each kind of skip, and the skips."""

    def __init__(self) -> None:
        self.values = 0
        self.valid = 0
        self.kinds: Counter[str] = Counter()
        self.by_rater: Counter[str] = Counter()
        self.skipped: list[dict[str, Any]] = []

    def read(self, raw: str, *, item: str, line: int | None, rater: str, dimension: str, kind: str | None = None) -> int | None:
        """The rating, or None for a skipped value (counted and listed; ``kind`` forces the kind of skip)."""
        self.values += 1
        kind = kind or classify(raw)
        if kind is None:
            self.valid += 1
            return int(raw)
        self.kinds[kind] += 1
        self.by_rater[rater] += 1
        self.skipped.append({"item": item, "line": line, "rater": rater, "dimension": dimension, "value": raw, "kind": kind})
        return None

    def notes(self) -> dict[str, Any]:
        return {
            "values": self.values,
            "valid": self.valid,
            "skipped": sum(self.kinds.values()),
            "skipped_by_kind": dict(sorted(self.kinds.items())),
            "skipped_by_rater": dict(sorted(self.by_rater.items())),
            "skipped_values": self.skipped,
        }


def parse_selfeval(raw: str, log: RatingLog, *, item: str, line: int | None) -> dict[str, dict[str, int]]:
    """``a|b|c_d|e|f`` -> {"speaker": {empathy, relevance, fluency}, "listener": {...}}, valid values only."""
    triples = raw.split("_")
    out: dict[str, dict[str, int]] = {}
    for k, rater in enumerate(ED_RATERS):
        values = triples[k].split("|") if len(triples) == 2 else []
        got: dict[str, int] = {}
        if len(values) != 3:  # not two triples of three values: no value in it can be placed
            for dim in ED_DIMENSIONS:
                log.read(raw, item=item, line=line, rater=rater, dimension=dim, kind="malformed")
            out[rater] = got
            continue
        for dim, v in zip(ED_DIMENSIONS, values):
            r = log.read(v, item=item, line=line, rater=rater, dimension=dim)
            if r is not None:
                got[dim] = r
        out[rater] = got
    return out


class EmpatheticDialoguesRatedLoader(EmpatheticDialoguesLoader):
    name = "empathetic_dialogues_rated"
    description = (
        "EmpatheticDialogues test CSV with the selfeval ratings: the Speaker's rating of the Listener "
        "(empathy, relevance, fluency) attached to each conversation"
    )

    def read(self, ref: SourceRef) -> LoadedSource:
        loaded = super().read(ref)
        log = RatingLog()
        for c in loaded.contexts:
            ratings = parse_selfeval(c.metadata.get("selfeval", ""), log, item=c.id, line=c.metadata.get("line"))
            c.metadata["ratings"] = {"of_listener_by_speaker": ratings["speaker"], "of_speaker_by_listener": ratings["listener"]}
            c.metadata["human_ratings"] = dict(ratings["speaker"])
            c.metadata["human_rater"] = "speaker (rates the listener; first selfeval triple)"
        loaded.notes["ratings"] = log.notes()
        return loaded

    def stats(self, contexts: list[Context]) -> dict[str, Any]:
        return {**super().stats(contexts), "rated": sum(1 for c in contexts if c.metadata.get("human_ratings"))}


# --------------------------------------------------------------------------------- ESConv surveys

SEEKER_ROLES = {"speaker", "seeker"}  # FailedESConv.json / ESConv.json
SUPPORTER_ROLES = {"listener", "supporter"}
ESCONV_RATED = ("empathy", "relevance")  # the seeker's ratings of the supporter
FAILED_RAW = f"https://raw.githubusercontent.com/thu-coai/Emotional-Support-Conversation/{ESCONV_COMMIT}/FailedESConv.json"
RAW_BLOBS = {
    "esconv/ESConv.json": "2f7a69eeda505053eac68f9ab26fd728d0f6db31",
    "esconv/FailedESConv.json": "d6c9172720c8d23d09a8a5dac779f59a8bc3077e",
}
RAW_DATASET = "ESConv (raw release files)"
RAW_URLS = {"esconv/ESConv.json": ESCONV_RAW, "esconv/FailedESConv.json": FAILED_RAW}


def _download_raw(root: Path) -> None:
    """Both raw-format ESConv files, pinned to thu-coai's commit and checked against their git blob ids."""
    for rel, url in RAW_URLS.items():
        if (root / rel).exists():
            continue
        data = fetch(url, rel)
        if git_blob_id(data) != RAW_BLOBS[rel]:
            raise UserError(
                f"{url}: downloaded bytes do not match the pinned release of {rel} (git blob {RAW_BLOBS[rel]}); "
                f"set MASCOT_DATA_DIR to a folder holding a verified copy"
            )
        atomic_write_bytes(root / rel, data)


DOWNLOADERS.setdefault(RAW_DATASET, _download_raw)


def _text(v: Any) -> str:
    return str(v).strip() if v is not None else ""


class ESConvRatedLoader(Loader):
    name = "esconv_rated"
    domain = "emotional"
    description = "ESConv raw release format (FailedESConv.json, ESConv.json) with the seeker's survey ratings of the supporter"
    default_path = "esconv/FailedESConv.json"
    filters = {
        "emotion": ("emotion_type, e.g. anxiety, depression, sadness", lambda c: c.emotion),
        "problem": ("problem_type, e.g. job crisis, breakup with partner", lambda c: c.problem),
    }

    def read(self, ref: SourceRef) -> LoadedSource:
        self.check_options(ref)
        found = locate(RAW_DATASET, ref.path or self.default_path, ref.data_dir)
        path = found.path
        what = "an ESConv file in the raw release format (a JSON array of dialogues)"
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"{path}: not valid JSON ({str(exc).splitlines()[0][:80]}); expected {what}") from None
        if not isinstance(data, list):
            raise UserError(f"{path}: top level is {type(data).__name__}, expected {what}")
        log = RatingLog()
        unrated = 0
        contexts: list[Context] = []
        for i, d in enumerate(data, 1):
            where = f"{path}: dialogue {i}"
            if not isinstance(d, dict) or not isinstance(d.get("dialog"), list) or not d["dialog"]:
                raise UserError(f"{where}: no 'dialog' list of turns; expected {what}")
            turns: list[HumanTurn] = []
            strategies: list[str | None] = []
            feedback: list[str | None] = []
            for k, t in enumerate(d["dialog"], 1):
                role = t.get("speaker") if isinstance(t, dict) else None
                if role not in SEEKER_ROLES | SUPPORTER_ROLES or not isinstance(t.get("content"), str):
                    raise UserError(
                        f"{where}, turn {k}: speaker {role!r} is not one of "
                        f"{', '.join(sorted(SEEKER_ROLES | SUPPORTER_ROLES))} or the turn has no content; expected {what}"
                    )
                ann = t.get("annotation") or {}
                turns.append(HumanTurn("seeker" if role in SEEKER_ROLES else "supporter", t["content"].strip()))
                strategies.append(ann.get("strategy"))
                feedback.append(ann.get("feedback"))
            survey = d.get("survey_score") or {}
            seeker = survey.get("seeker") or {}
            cid = f"{path.stem}-{i:04d}"
            ratings: dict[str, int] = {}
            for dim in ESCONV_RATED:
                if dim in seeker:
                    r = log.read(
                        _text(seeker[dim]) if isinstance(seeker[dim], str) else json.dumps(seeker[dim]),
                        item=cid,
                        line=None,
                        rater="seeker",
                        dimension=dim,
                    )
                    if r is not None:
                        ratings[dim] = r
            if not any(dim in seeker for dim in ESCONV_RATED):
                unrated += 1
            contexts.append(
                Context(
                    id=cid,
                    source="esconv_rated",
                    domain="emotional",
                    situation=_text(d.get("situation")),
                    emotion=_text(d.get("emotion_type")).lower() or None,
                    problem=_text(d.get("problem_type")) or None,
                    turns=turns,
                    user_speaker="seeker",
                    metadata={
                        "file": path.name,
                        "index": i,
                        "experience_type": d.get("experience_type"),
                        "strategies": strategies,
                        "feedback": feedback,
                        "survey_score": survey,
                        "human_ratings": ratings,
                        "human_rater": "seeker (rates the supporter; survey_score.seeker)",
                    },
                )
            )
        notes = {"ratings": {**log.notes(), "dialogues_without_survey": unrated}}
        return LoadedSource(contexts, files=[path], origin=found.origin, notes=notes)

    def stats(self, contexts: list[Context]) -> dict[str, Any]:
        return {
            "dialogues": len(contexts),
            "rated": sum(1 for c in contexts if c.metadata.get("human_ratings")),
            "turns": sum(len(c.turns) for c in contexts),
        }


LOADERS.add("empathetic_dialogues_rated", EmpatheticDialoguesRatedLoader)
LOADERS.add("esconv_rated", ESConvRatedLoader)
