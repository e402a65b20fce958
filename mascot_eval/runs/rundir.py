"""A run directory: everything one evaluation run produced, resumable and written atomically.

Layout (``results/runs/<run-id>/`` by default)::

    manifest.json        provenance (see runs/manifest.py)
    transcripts.jsonl    one Transcript per line (appended as dialogues finish)
    judgments.jsonl      one judge score row per line (appended as judge calls finish)
    comparisons.jsonl    three-way comparison rows
    metrics.parquet/.csv automatic metrics, long format
    summary.json         statistics per system x split x criterion/metric
    report.html          the self-contained report

JSONL files grow one complete line at a time; a line cut short by a kill is ignored when read,
so a rerun with the same settings resumes from what was finished.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import UserError
from ..fileio import append_jsonl, atomic_write_json, read_json_object, read_jsonl
from ..transcript import Transcript


# manifest sections and the JSON type each must have (a manifest of the wrong shape is refused on read,
# before any command writes anything)
MANIFEST_SECTIONS: dict[str, type | tuple[type, ...]] = {
    "provenance": dict, "task_files": dict, "tasks": dict, "systems": dict, "models": dict, "judges": dict,
    "metrics": dict, "seeds": dict, "settings": dict, "generate": dict, "comparisons": dict, "usage": dict,
    "invocations": list, "run_id": str, "schema": str, "status": str,
}


def check_manifest_shape(m: dict[str, Any], path: Path) -> None:
    for key, kind in MANIFEST_SECTIONS.items():
        if m.get(key) is not None and not isinstance(m[key], kind):
            name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise UserError(f"{path}: field '{key}' is a {type(m[key]).__name__}, expected a {name}; restore the "
                            "manifest or start a new run directory")
    if isinstance(m.get("invocations"), list) and not all(isinstance(i, dict) for i in m["invocations"]):
        raise UserError(f"{path}: field 'invocations' must be a list of objects; restore the manifest or start a new "
                        "run directory")


def new_run_id(prefix: str = "run") -> str:
    return f"{prefix}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


class RunDir:
    def __init__(self, path: str | Path, *, create: bool = False) -> None:
        self.path = Path(path)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        elif not self.path.is_dir():
            raise UserError(f"run directory {self.path} does not exist; pass a folder written by `mascot-eval run` or `generate`")

    @classmethod
    def default(cls, run_id: str | None = None) -> RunDir:
        return cls(paths.results_dir() / "runs" / (run_id or new_run_id()), create=True)

    # files
    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def transcripts_path(self) -> Path:
        return self.path / "transcripts.jsonl"

    @property
    def judgments_path(self) -> Path:
        return self.path / "judgments.jsonl"

    @property
    def comparisons_path(self) -> Path:
        return self.path / "comparisons.jsonl"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.parquet"

    @property
    def summary_path(self) -> Path:
        return self.path / "summary.json"

    @property
    def report_path(self) -> Path:
        return self.path / "report.html"

    @property
    def run_id(self) -> str:
        return self.path.name

    # manifest
    def read_manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {}
        m = read_json_object(self.manifest_path, what="a run manifest (restore it or start a new run directory)")
        check_manifest_shape(m, self.manifest_path)
        return m

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        """Merge top-level fields into manifest.json (dicts merge one level deep) and write atomically."""
        m = self.read_manifest()
        for k, v in fields.items():
            if isinstance(v, dict) and isinstance(m.get(k), dict):
                m[k] = {**m[k], **v}
            else:
                m[k] = v
        atomic_write_json(self.manifest_path, m)
        return m

    # transcripts
    def append_transcript(self, t: Transcript) -> None:
        append_jsonl(self.transcripts_path, t.to_dict())

    def transcripts(self) -> list[Transcript]:
        """All transcripts; for a dialogue id written twice, the last one wins."""
        out: dict[str, Transcript] = {}
        for i, row in enumerate(read_jsonl(self.transcripts_path, what="a transcripts file")):
            where = f"{self.transcripts_path}:{i + 1}"
            try:
                t = Transcript.from_dict(row, where=where)
            except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong type
                raise UserError(f"{where}: not a valid transcript ({type(exc).__name__}); restore the file or "
                                "regenerate") from None
            out[t.dialogue_id] = t
        return list(out.values())

    def transcript_ids(self) -> set[str]:
        return {row["dialogue_id"] for row in read_jsonl(self.transcripts_path) if "dialogue_id" in row}

    # judgments
    def append_judgment(self, row: dict[str, Any]) -> None:
        append_jsonl(self.judgments_path, row)

    def judgments(self) -> Iterator[dict[str, Any]]:
        yield from read_jsonl(self.judgments_path)

    def comparisons(self) -> Iterator[dict[str, Any]]:
        yield from read_jsonl(self.comparisons_path)
