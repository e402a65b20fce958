"""Contexts written by people: a user's own ``jsonl`` file and the built-in ``demo`` scenarios (YAML).

Both use one record schema (:class:`ContextRecord`), one record per JSON line (``jsonl``) or one
list item (``demo``)::

    id          str, required, unique in the file
    situation   str, required: what the user is going through / the meeting topic or query
    domain      "emotional" | "workplace" (default: the task's domain)
    emotion     str            valence  "positive" | "negative" | "neutral"
    problem     str            query    str          meeting_domain  str
    participants [str]         turns    [{speaker: str, text: str}]   metadata {...}
    user_speaker str (default "user"): the turns' speaker name for the person seeking support;
                 their first turn is the context's opening line

``source.path`` is resolved beside the task file and must stay in that folder (no absolute paths,
no '..' above it, no symlink leading out).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UserError
from ..fileio import MAX_CONTEXTS_BYTES, MAX_CONTEXTS_YAML_BYTES, confined_path
from ..yamlfile import load_yaml, validation_message
from .context import Context, HumanTurn
from .jsonlines import iter_json_lines
from .loaders import LOADERS, LoadedSource, Loader, SourceRef


class TurnRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    speaker: str = Field(min_length=1)
    text: str = Field(min_length=1)


class ContextRecord(BaseModel):
    """One user-written context (the ``jsonl`` and ``demo`` schema)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    situation: str = Field(min_length=1)
    domain: Literal["emotional", "workplace"] | None = None
    emotion: str | None = None
    valence: Literal["positive", "negative", "neutral"] | None = None
    problem: str | None = None
    query: str | None = None
    meeting_domain: str | None = None
    participants: list[str] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    user_speaker: str = "user"  # the turns[].speaker that is the person seeking support

    def to_context(self, source: str, default_domain: str) -> Context:
        return Context(
            id=self.id,
            source=source,
            domain=self.domain or default_domain,
            situation=self.situation.strip(),
            emotion=self.emotion,
            valence=self.valence,
            problem=self.problem,
            query=self.query,
            meeting_domain=self.meeting_domain,
            participants=list(self.participants),
            turns=[HumanTurn(t.speaker, t.text) for t in self.turns],
            metadata=dict(self.metadata),
            user_speaker=self.user_speaker,
        )


def task_relative(ref: SourceRef, path: str, *, field: str = "source.path", what: str = "context file") -> Path:
    """``path`` resolved beside the task file (the tasks folder for a task built in code); absolute
    paths, '..' out of that folder and symlinks leading out of it are refused; nothing is read."""
    from .. import paths

    # beside the task file, then in tasks/ of the user folder and of the shipped data; never outside them
    roots = [*([ref.task_file.parent] if ref.task_file else []), *paths.dirs("tasks")] or [paths.tasks_dir()]
    p = confined_path(roots, path, field=field, where=ref.where, what=what)
    if not p.exists():
        p = roots[0] / path  # not found anywhere: name it where a user would put it
    if p.is_dir():
        raise UserError(f"{p}: is a folder; field '{field}' in {ref.where} must name a {what}")
    if not p.is_file():
        raise UserError(f"{p}: {what} not found; fix field '{field}' in {ref.where}")
    return p


_task_relative = task_relative


def _records(items: list[tuple[str, Any]], source: str, default_domain: str) -> list[Context]:
    out: list[Context] = []
    seen: set[str] = set()
    for where, raw in items:
        if not isinstance(raw, dict):
            raise UserError(f"{where}: expected a mapping with at least 'id' and 'situation'")
        try:
            rec = ContextRecord.model_validate(raw, strict=True)
        except ValidationError as exc:
            raise UserError(validation_message(where, exc)) from None
        if rec.id in seen:
            raise UserError(f"{where}: id {rec.id!r} appears twice; ids must be unique")
        seen.add(rec.id)
        out.append(rec.to_context(source, default_domain))
    return out


class _UserFileLoader(Loader):
    filters = {
        "domain": ("emotional / workplace", lambda c: c.domain),
        "valence": ("positive / negative / neutral", lambda c: c.valence),
        "emotion": ("emotion label", lambda c: c.emotion),
        "meeting_domain": ("meeting domain", lambda c: c.meeting_domain),
    }
    options = {
        "domain": ("domain for records without one", None),
    }

    def _default_domain(self, ref: SourceRef, opts: dict[str, Any]) -> str:
        d = opts["domain"] or ref.task_domain or "emotional"
        if d not in ("emotional", "workplace"):
            raise UserError(f"{ref.where}: field 'source.options.domain': must be emotional or workplace")
        return d

    def stats(self, contexts: list[Context]) -> dict[str, Any]:
        return {"contexts": len(contexts), "domains": dict(sorted(Counter(c.domain for c in contexts).items()))}


class JsonlLoader(_UserFileLoader):
    name = "jsonl"
    description = "your own contexts: one JSON object per line (schema in docs/tasks.md)"

    def read(self, ref: SourceRef) -> LoadedSource:
        opts = self.check_options(ref)
        if not ref.path:
            raise UserError(f"{ref.where}: field 'source.path': the jsonl loader needs the path of your .jsonl file")
        path = _task_relative(ref, ref.path)
        rows = [
            (f"{path}:{lineno}", obj) for lineno, obj in iter_json_lines(path, "a context JSONL file", limit=MAX_CONTEXTS_BYTES)
        ]
        if not rows:
            raise UserError(f"{path}: no contexts (the file is empty); add one JSON object per line")
        return LoadedSource(_records(rows, "jsonl", self._default_domain(ref, opts)), files=[path], origin="task")


class DemoLoader(_UserFileLoader):
    name = "demo"
    description = "built-in scenarios written for this project (tasks/data/demo_contexts.yaml), no dataset needed"
    default_path = "data/demo_contexts.yaml"

    def read(self, ref: SourceRef) -> LoadedSource:
        opts = self.check_options(ref)
        path = _task_relative(ref, ref.path or self.default_path)
        data = load_yaml(path, limit=MAX_CONTEXTS_YAML_BYTES, what="a contexts YAML file")
        items = data.get("contexts") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise UserError(f"{path}: expected a top-level 'contexts:' list of scenarios")
        rows = [(f"{path} (contexts[{i}])", raw) for i, raw in enumerate(items)]
        return LoadedSource(_records(rows, "demo", self._default_domain(ref, opts)), files=[path], origin="task")


LOADERS.add("jsonl", JsonlLoader)
LOADERS.add("demo", DemoLoader)
