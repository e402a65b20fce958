"""A run directory: everything one evaluation run produced, resumable, written atomically, one writer.

Layout (``results/runs/<run-id>/`` by default)::

    manifest.json        provenance, status and the usage ledger (records.Manifest)
    transcripts.jsonl    one Transcript per line (appended as dialogues finish)
    failures.jsonl       failed attempts (a dialogue that failed, with the calls it paid for)
    judgments.jsonl      one JudgmentRow per line (appended as judge calls finish)
    comparisons.jsonl    three-way ComparisonRows
    metrics.parquet/.csv automatic metrics, long format (records.MetricRow)
    summary.json         every statistic of the run (records.Summary)
    report.html          the self-contained report
    .lock                held (flock) by the one process writing the run; holds its PID

JSONL files grow one complete line at a time; a line cut short by a kill is ignored when read and
dropped by the next writer, so a rerun with the same settings resumes from what was finished.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import UserError
from ..fileio import append_jsonl, atomic_write_json, read_json_object, read_jsonl, repair_jsonl_tail
from ..records.comparison import ComparisonRow
from ..records.judgment import JudgmentRow
from ..records.manifest import Manifest
from ..transcript import Transcript

LOCK_NAME = ".lock"
_HELD: dict[str, list[int]] = {}  # run directory (resolved) -> [fd, depth]: the locks this process holds
GROWING = ("transcripts.jsonl", "failures.jsonl", "judgments.jsonl", "comparisons.jsonl")


def new_run_id(prefix: str = "run") -> str:
    return f"{prefix}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


class RunLocked(UserError):
    """Another process holds the run directory's lock."""


def _locked(path: Path, holder: str) -> RunLocked:
    return RunLocked(
        f"{path}: another mascot-eval process (PID {holder or 'unknown'}) is writing this run directory; "
        "wait for it to finish or use another --out"
    )


class RunDir:
    def __init__(self, path: str | Path, *, create: bool = False) -> None:
        self.path = Path(path)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        elif not self.path.is_dir():
            raise UserError(f"run directory {self.path} does not exist; pass a folder written by `mascot-eval run` or `generate`")

    @classmethod
    def default(cls, run_id: str | None = None, *, create: bool = True) -> RunDir:
        path = paths.results_dir() / "runs" / (run_id or new_run_id())
        return cls(path, create=True) if create else cls.planned(path)

    @classmethod
    def planned(cls, path: str | Path) -> RunDir:
        """A run directory that may not exist yet (nothing is created until :meth:`create`)."""
        rd = cls.__new__(cls)
        rd.path = Path(path)
        return rd

    def create(self) -> RunDir:
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    @property
    def exists(self) -> bool:
        return self.path.is_dir()

    # files
    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def transcripts_path(self) -> Path:
        return self.path / "transcripts.jsonl"

    @property
    def failures_path(self) -> Path:
        return self.path / "failures.jsonl"

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

    # the one-writer lock
    @contextmanager
    def lock(self) -> Iterator[RunDir]:
        """Hold the run's advisory lock for the block; a second writer stops at once (exit 2) naming the
        holder's PID, having written nothing. Re-entrant within one process. Every write takes it (for
        that write alone when no block holds it), so two processes can never write one run."""
        self.create()
        key = str(self.path.resolve())
        held = _HELD.get(key)
        if held is not None:  # this process holds it already (through this or another RunDir object)
            held[1] += 1
            try:
                yield self
            finally:
                held[1] -= 1
            return
        lock_path = self.path / LOCK_NAME
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise _locked(self.path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[key] = [fd, 1]
        try:
            for name in GROWING:  # the single writer drops lines a killed predecessor cut short
                repair_jsonl_tail(self.path / name)
            yield self
        finally:
            del _HELD[key]
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def check_not_locked(self) -> None:
        """Stop at once (exit 2, nothing written) when another process holds this run's lock."""
        lock_path = self.path / LOCK_NAME
        if not lock_path.exists() or self.locked:
            return
        try:
            fd = os.open(lock_path, os.O_RDWR)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _locked(self.path, os.pread(fd, 64, 0).decode("ascii", "replace").strip()) from None
        finally:
            os.close(fd)  # closing releases a lock we may have taken

    @property
    def locked(self) -> bool:
        """Whether this process holds the run's lock."""
        return str(self.path.resolve()) in _HELD

    # manifest
    def manifest(self) -> Manifest | None:
        """The typed manifest, or None when the run has none yet (a wrong shape is a one-line error)."""
        if not self.manifest_path.exists():
            return None
        data = read_json_object(self.manifest_path, what="a run manifest (restore it or start a new run directory)")
        return Manifest.from_dict(data, where=str(self.manifest_path))

    def read_manifest(self) -> dict[str, Any]:
        m = self.manifest()
        return m.to_dict() if m is not None else {}

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        """Merge top-level fields into manifest.json (dicts merge one level deep), validate, write atomically."""
        with self.lock():
            return self._update_manifest(fields)

    def _update_manifest(self, fields: dict[str, Any]) -> dict[str, Any]:
        m = self.read_manifest() or {"run_id": self.run_id}
        for k, v in fields.items():
            if hasattr(v, "model_dump"):
                v = v.model_dump(mode="json", by_alias=True)
            if isinstance(v, dict) and isinstance(m.get(k), dict):
                m[k] = {**m[k], **v}
            else:
                m[k] = v
        m.setdefault("run_id", self.run_id)
        m.setdefault("schema", "mascot-run/2")
        manifest = Manifest.from_dict(m, where=f"{self.manifest_path} (being written)")
        out = manifest.to_dict()
        atomic_write_json(self.manifest_path, out)
        return out

    # transcripts
    def append_transcript(self, t: Transcript) -> None:
        with self.lock():
            append_jsonl(self.transcripts_path, t.to_dict())

    def transcripts(self, *, all_lines: bool = False) -> list[Transcript]:
        """All transcripts; for a dialogue id written twice, the last one wins (``all_lines``: every line)."""
        out: dict[str, Transcript] = {}
        every: list[Transcript] = []
        for i, row in enumerate(read_jsonl(self.transcripts_path, what="a transcripts file")):
            t = Transcript.from_dict(row, where=f"{self.transcripts_path}:{i + 1}")
            out[t.dialogue_id] = t
            every.append(t)
        return every if all_lines else list(out.values())

    def transcript_ids(self) -> set[str]:
        return {row["dialogue_id"] for row in read_jsonl(self.transcripts_path) if isinstance(row, dict) and "dialogue_id" in row}

    # failed attempts
    def append_failure(self, row: dict[str, Any]) -> None:
        with self.lock():
            append_jsonl(self.failures_path, row)

    def failures(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self.failures_path))

    # judgments and comparisons (validated records, as dicts)
    def append_judgment(self, row: dict[str, Any]) -> None:
        line = JudgmentRow.from_dict(row, where="judgment being written").to_dict()
        with self.lock():
            append_jsonl(self.judgments_path, line)

    def judgments(self) -> Iterator[dict[str, Any]]:
        for i, row in enumerate(read_jsonl(self.judgments_path)):
            yield JudgmentRow.from_dict(row, where=f"{self.judgments_path}:{i + 1}").to_dict()

    def append_comparison(self, row: dict[str, Any]) -> None:
        line = ComparisonRow.from_dict(row, where="comparison being written").to_dict()
        with self.lock():
            append_jsonl(self.comparisons_path, line)

    def comparisons(self) -> Iterator[dict[str, Any]]:
        for i, row in enumerate(read_jsonl(self.comparisons_path)):
            yield ComparisonRow.from_dict(row, where=f"{self.comparisons_path}:{i + 1}").to_dict()
