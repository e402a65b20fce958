"""Content-addressed response cache shared by every backend: one SQLite file in WAL mode.

Key = hash of the backend's identity (kind, model, endpoint, LoRA adapter and its content hash),
the messages and the decoding parameters (``sample_index`` included, so the k-th sample of a
sampled generation is its own reproducible entry). Retry, concurrency and rate settings and tags
never enter the key; API keys never enter anything stored here.

Each answer is committed as soon as it arrives (a killed run loses only the calls in flight).
Several processes may share the file (WAL + busy timeout); a process opens it (creates it, switches
it to WAL, checks it) under an advisory file lock, so two first runs never race on a new file; rows
are written with ``INSERT OR IGNORE`` so one key is stored once. A file SQLite cannot read
(malformed, not a database) is reported, moved aside (``responses.sqlite.corrupt-<time>``) and
replaced by a fresh cache, never silently reused; a locked or busy file is not corrupt and is
never moved aside.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from ..fileio import stable_hash
from ..paths import cache_dir
from .base import ChatResponse, GenerationParams

log = logging.getLogger(__name__)

FILENAME = "responses.sqlite"
KEY_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    created REAL NOT NULL,
    response TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_spec ON responses(spec);
"""


def response_cache_dir(explicit: str | os.PathLike[str] | None = None, *, create: bool = True) -> Path:
    """``--cache-dir``, else ``MASCOT_RESPONSE_CACHE_DIR``, else ``<user cache>/responses``."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("MASCOT_RESPONSE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return cache_dir(create=create) / "responses"


def read_stats(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """What :meth:`ResponseCache.stats` reports, without writing anything (``cache stats``).

    The file is opened read-only; while a writer holds it (``-wal`` and ``-shm`` exist) SQLite reads
    through them, otherwise the file alone is complete and is read as immutable (no side files are
    created). Nothing is created, converted to WAL or moved aside: a file SQLite cannot read is
    reported under ``unreadable`` (the next run moves it aside and starts a fresh cache).
    """
    from urllib.parse import quote

    path = Path(directory) / FILENAME
    out: dict[str, Any] = {"path": str(path), "rows": 0, "bytes": 0, "by_model": {}, "exists": path.is_file()}
    if not out["exists"]:
        return out
    live = all(Path(str(path) + s).exists() for s in ("-wal", "-shm"))
    uri = f"file:{quote(str(path.resolve()))}?{'mode=ro' if live else 'immutable=1'}"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=60.0)
        try:
            out["rows"] = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            out["by_model"] = dict(conn.execute("SELECT spec, COUNT(*) FROM responses GROUP BY spec ORDER BY spec").fetchall())
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise
        out["unreadable"] = str(exc)  # e.g. "no such table: responses"
    except sqlite3.DatabaseError as exc:  # malformed, not a database
        out["unreadable"] = str(exc)
    out["bytes"] = sum(p.stat().st_size for p in path.parent.glob(f"{FILENAME}*") if p.is_file() and "corrupt" not in p.name)
    return out


_PARAM_FIELDS = tuple(f.name for f in fields(GenerationParams))
_KEYED_WHEN_SET = ("prefill", "choices")  # added later: left out while empty, so earlier keys stay valid


def cache_key(identity: dict[str, Any], messages: list[dict[str, str]], params: GenerationParams) -> str:
    # the same JSON as asdict(params) (tuples become lists), without asdict's deep copies
    p = {name: getattr(params, name) for name in _PARAM_FIELDS}
    for name in _KEYED_WHEN_SET:
        if not p[name]:
            del p[name]
    return stable_hash({"v": KEY_VERSION, "backend": identity, "messages": messages, "params": p}, 40)


class ResponseCache:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        self.path = self.dir / FILENAME
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.moved_aside: Path | None = None

    # -- connection -------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        self.dir.mkdir(parents=True, exist_ok=True)
        with _exclusive(self.dir / f"{FILENAME}.lock"):  # one process at a time creates, checks or replaces the file
            try:
                conn = self._connect()
            except sqlite3.OperationalError:  # locked, busy, cannot open: not corruption; never move it aside
                raise
            except sqlite3.DatabaseError as exc:  # malformed, not a database, failed integrity check
                self._move_aside(exc)
                conn = self._connect()
        self._conn = conn
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            ok = conn.execute("PRAGMA quick_check").fetchone()
            if not ok or ok[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {ok[0] if ok else 'no answer'}")
            conn.executescript(SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _move_aside(self, exc: Exception) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{FILENAME}.corrupt-{stamp}-{os.getpid()}")
        os.replace(self.path, target)
        for suffix in ("-wal", "-shm"):
            side = Path(str(self.path) + suffix)
            if side.exists():
                os.replace(side, Path(str(target) + suffix))
        self.moved_aside = target
        msg = f"response cache {self.path} is unreadable ({exc}); moved it to {target} and started a fresh cache"
        log.warning(msg)
        import sys

        print(f"warning: {msg}", file=sys.stderr)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- rows -------------------------------------------------------------------------------
    def get(self, key: str) -> ChatResponse | None:
        with self._lock:
            row = self._open().execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return ChatResponse.from_dict(json.loads(row[0]))

    def put(self, key: str, spec: str, response: ChatResponse) -> bool:
        """Store one answer; returns False when the key was already there (another caller won)."""
        d = response.to_dict()
        d.update(cached=False, retries=0)
        blob = json.dumps(d, ensure_ascii=False)
        with self._lock:
            cur = self._open().execute(
                "INSERT OR IGNORE INTO responses (key, spec, created, response) VALUES (?, ?, ?, ?)",
                (key, spec, time.time(), blob),
            )
            return cur.rowcount == 1

    def stats(self) -> dict[str, Any]:
        with self._lock:
            conn = self._open()
            total = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            per_spec = dict(conn.execute("SELECT spec, COUNT(*) FROM responses GROUP BY spec ORDER BY spec").fetchall())
        size = sum(p.stat().st_size for p in self.dir.glob(f"{FILENAME}*") if p.is_file() and "corrupt" not in p.name)
        return {"path": str(self.path), "rows": total, "bytes": size, "by_model": per_spec}

    def clear(self, spec: str | None = None) -> int:
        with self._lock:
            conn = self._open()
            if spec is None:
                n = conn.execute("DELETE FROM responses").rowcount
            else:
                n = conn.execute("DELETE FROM responses WHERE spec = ? OR spec LIKE ?", (spec, spec + "#%")).rowcount
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if spec is None:
            with self._lock:
                self._open().execute("VACUUM")
        return n


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """An advisory lock across processes (POSIX ``flock``; elsewhere SQLite's own locking only)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_CACHES: dict[str, ResponseCache] = {}
_CACHES_LOCK = threading.Lock()


_BY_ARGS: dict[tuple[str | None, str | None, str], ResponseCache] = {}


def open_cache(directory: str | os.PathLike[str] | None = None) -> ResponseCache:
    """One shared :class:`ResponseCache` per folder in a process (cheap to call for every request)."""
    args = (
        str(directory) if directory else None,
        os.environ.get("MASCOT_RESPONSE_CACHE_DIR"),
        os.environ.get("MASCOT_CACHE_DIR", "") + "|" + os.environ.get("XDG_CACHE_HOME", ""),
    )
    hit = _BY_ARGS.get(args)
    if hit is not None:
        return hit
    d = str(response_cache_dir(directory).resolve())
    with _CACHES_LOCK:
        if d not in _CACHES:
            _CACHES[d] = ResponseCache(d)
        _BY_ARGS[args] = _CACHES[d]
        return _CACHES[d]
