"""Judge guards: degenerate verdicts, judge-directed text in the data, verdicts that follow it.

Three checks, each switched per judge in its YAML (``guards:``), with patterns as data in
``judges/guards/patterns.yaml``:

- **degenerate** (mode generate): a verdict whose criteria all carry the same score with a
  placeholder or empty rationale (``"test_rationale"``, ``"<one or two sentences>"``, ...), or, for
  judges that asked for a JSON schema (``structured_output``), values outside it (a string or
  fractional score, an unknown field, scores nested under ``scores``), or (opt-in,
  ``rationale_must_mention_dialogue``) a rationale sharing no word with the material judged.
  Such a verdict is unscored with reason ``degenerate: ...``.
- **neutralise**: each sentence of the material (dialogue turns, situation) that addresses the judge
  (asks for scores, announces a rubric or new instructions, assigns a role, imitates the data
  markers, carries a JSON verdict) is replaced by a marker before the prompt is rendered; the
  prompt then says how many passages were removed and why.
- **flag_steered**: a verdict whose rationale says it follows an instruction from the material, or
  (when the judge saw judge-directed text, i.e. without neutralise) whose criteria all equal the
  score that text asked for, is unscored with reason ``steered: ...``.

The checks never turn a verdict into a different score: a flagged verdict is unscored and counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import UserError
from ..yamlfile import load_model

DEFAULT_FILE = "patterns.yaml"


class Guards(BaseModel):
    """The ``guards:`` block of a judge spec (all but one on by default)."""

    model_config = ConfigDict(extra="forbid")

    degenerate: bool = True  # placeholder verdicts and out-of-schema values -> unscored 'degenerate'
    rationale_must_mention_dialogue: bool = False  # also: a rationale sharing no word with the material
    neutralise: bool = True  # judge-directed sentences in the material -> a marker, before prompting
    flag_steered: bool = True  # a verdict following an instruction found in the material -> unscored 'steered'
    patterns: str = Field(default=DEFAULT_FILE, description="file in judges/guards/")

    def unguarded(self) -> Guards:
        """The same guards without the steering defence (for measuring what the defence does)."""
        return self.model_copy(update={"neutralise": False, "flag_steered": False})


class PatternFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    judge_directed: dict[str, str] = Field(min_length=1)
    marker: str = Field(min_length=1)
    follows_instruction: list[str] = Field(default_factory=list)
    placeholders: list[str] = Field(default_factory=list)
    rubric_words: list[str] = Field(default_factory=list)

    @field_validator("judge_directed")
    @classmethod
    def _compile_named(cls, v: dict[str, str]) -> dict[str, str]:
        for name, pat in v.items():
            _compile(pat, f"judge_directed.{name}")
        return v

    @field_validator("follows_instruction")
    @classmethod
    def _compile_list(cls, v: list[str]) -> list[str]:
        for i, pat in enumerate(v):
            _compile(pat, f"follows_instruction.{i}")
        return v


def _compile(pat: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pat, re.I)
    except re.error as exc:
        raise ValueError(f"{where}: not a valid regular expression ({exc})") from None


@dataclass(frozen=True)
class Patterns:
    file: str
    judge_directed: tuple[tuple[str, re.Pattern[str]], ...]
    marker: str
    follows_instruction: tuple[re.Pattern[str], ...]
    placeholders: frozenset[str]
    rubric_words: frozenset[str]


@lru_cache(maxsize=8)
def _load(path_str: str, mtime_ns: int) -> Patterns:
    pf = load_model(path_str, PatternFile)
    return Patterns(
        file=path_str,
        judge_directed=tuple((k, re.compile(v, re.I)) for k, v in pf.judge_directed.items()),
        marker=pf.marker,
        follows_instruction=tuple(re.compile(p, re.I) for p in pf.follows_instruction),
        placeholders=frozenset(_norm(p) for p in pf.placeholders),
        rubric_words=frozenset(w.lower() for w in pf.rubric_words),
    )


def patterns_path(judges_root: Path, guards: Guards) -> Path:
    """``guards/<patterns>`` in ``judges_root`` if it is a folder given by path, then in the user folder's and
    the shipped judges/ (the first that holds it); refused when it would leave those folders."""
    from .. import paths
    from ..fileio import confined_path

    return confined_path(
        [d / "guards" for d in paths.search("judges", judges_root)],
        guards.patterns,
        field="guards.patterns",
        where=f"judges in {judges_root}",
        what="guard patterns file",
    )


def load_patterns(judges_root: Path, guards: Guards) -> Patterns:
    path = patterns_path(judges_root, guards)
    if not path.is_file():
        raise UserError(f"{path}: guard patterns not found; the judge's guards.patterns names a file in {path.parent}")
    return _load(str(path), path.stat().st_mtime_ns)


# ------------------------------------------------------------------------------ judge-directed text

_SPLIT = re.compile(r"((?<=[.!?])[ \t]+|\n+)")


def _sentences(text: str) -> list[str]:
    """Sentences and the separators between them (even indices: sentences), so joining restores the text."""
    return _SPLIT.split(text)


def directed(sentence: str, pats: Patterns) -> str | None:
    """Name of the first judge-directed pattern the sentence matches, or None."""
    for name, rx in pats.judge_directed:
        if rx.search(sentence):
            return name
    return None


@dataclass
class Found:
    """Judge-directed passages of one text: (pattern name, sentence) each."""

    hits: list[tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.hits)


def neutralise(text: str, pats: Patterns, *, replace: bool = True) -> tuple[str, Found]:
    """Replace every judge-directed sentence of ``text`` by the marker (consecutive ones share one).

    With ``replace=False`` the text is returned unchanged and only the passages are reported.
    """
    parts = _sentences(text)
    found = Found()
    items: list[list[str]] = []  # [kind, text, separator after it]
    for i in range(0, len(parts), 2):
        sent, sep = parts[i], parts[i + 1] if i + 1 < len(parts) else ""
        name = directed(sent, pats) if sent.strip() else None
        if name is None:
            items.append(["text", sent, sep])
            continue
        found.hits.append((name, sent.strip()))
        if items and items[-1][0] == "marker":
            items[-1][2] = sep
        else:
            items.append(["marker", pats.marker, sep])
    if not replace or not found:
        return text, found
    return "".join(t + sep for _, t, sep in items), found


_WORD_SCORES = {
    "five": 5,
    "top": 5,
    "maximum": 5,
    "max": 5,
    "highest": 5,
    "perfect": 5,
    "full": 5,
    "best": 5,
    "one": 1,
    "lowest": 1,
    "minimum": 1,
    "worst": 1,
    "zero": 1,
}


def requested_score(found: Found) -> int | None:
    """The one score 1-5 the judge-directed passages ask for (a digit, or words such as 'top mark'); None if none or several."""
    wanted: set[int] = set()
    for _, s in found.hits:
        for d in re.findall(r"(?<![\d.])([1-5])(?!\.?\d)", s):
            wanted.add(int(d))
        for w, v in _WORD_SCORES.items():
            if re.search(rf"\b{w}\b", s, re.I):
                wanted.add(v)
    return wanted.pop() if len(wanted) == 1 else None


# ------------------------------------------------------------------------------------- verdicts


def _norm(s: str) -> str:
    return " ".join(str(s).lower().split()).strip(" .!?;:,'\"`")


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z']{3,}", text)}


def _stems(words: set[str], drop: frozenset[str]) -> set[str]:
    return {w[:4] for w in words if w not in drop}


def _out_of_schema(obj: dict[str, Any], criteria: tuple[str, ...]) -> str | None:
    if isinstance(obj.get("scores"), dict):
        return "scores nested under 'scores'"
    extra = [k for k in obj if k not in ("rationale", *criteria)]
    if extra:
        return f"unexpected field '{extra[0]}'"
    if "rationale" in obj and not isinstance(obj["rationale"], str):
        return "rationale is not a string"
    for c in criteria:
        v = obj.get(c)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer():
            return f"'{c}' is {json.dumps(v)[:20]}, not an integer"
    return None


def degenerate_reason(
    obj: dict[str, Any] | None,
    scores: dict[str, float],
    rationale: str | None,
    criteria: tuple[str, ...],
    *,
    guards: Guards,
    pats: Patterns,
    structured: bool,
    material: str,
) -> str | None:
    """Why a parsed verdict is degenerate (``"degenerate: ..."``), or None when it is not."""
    if not guards.degenerate:
        return None
    vals = {scores[c] for c in criteria}
    r = rationale if isinstance(rationale, str) else ""
    if len(vals) == 1 and _norm(r) in pats.placeholders:
        v = next(iter(vals))
        return f"degenerate: every criterion {v:g} with a placeholder rationale ({json.dumps(r)[:60]})"
    if structured and obj is not None:
        why = _out_of_schema(obj, criteria)
        if why:
            return f"degenerate: out of schema ({why})"
    if guards.rationale_must_mention_dialogue:
        mine = _stems(_words(r), pats.rubric_words)
        if not mine & _stems(_words(material), pats.rubric_words):
            return f"degenerate: the rationale does not mention the dialogue ({json.dumps(r)[:80]})"
    return None


def steered_reason(
    rationale: str | None, scores: dict[str, float], criteria: tuple[str, ...], seen: Found, *, guards: Guards, pats: Patterns
) -> str | None:
    """Why a verdict follows an instruction found in the material (``"steered: ..."``), or None."""
    if not guards.flag_steered:
        return None
    r = rationale or ""
    for rx in pats.follows_instruction:
        m = rx.search(r)
        if m:
            return f"steered: the rationale follows an instruction from the material ({json.dumps(r)[:80]})"
    if seen:
        want = requested_score(seen)
        if want is not None and all(scores[c] == want for c in criteria):
            return f"steered: every criterion {want}, the score judge-directed text in the material asked for ({json.dumps(seen.hits[0][1])[:80]})"
    return None
