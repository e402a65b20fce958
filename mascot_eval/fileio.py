"""Atomic file writes and crash-safe JSONL appends.

Whole files are written to a temporary sibling and renamed into place (``os.replace``), so a
reader never sees half a file. JSONL logs that grow during a run are appended one complete line at
a time and flushed; a line cut short by a kill is detected and ignored on read.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: os.umask is process-wide and not thread-safe


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are shared like any other file
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n")


def atomic_write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))


def append_jsonl(path: str | os.PathLike[str], row: Any) -> None:
    """Append one complete JSON line and flush it to disk."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(row, ensure_ascii=False, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def repair_jsonl_tail(path: str | os.PathLike[str]) -> bool:
    """Drop a last line cut short by a kill, so the next append starts on a fresh line.

    Only the single writer of a file calls this (a run directory is locked while it is written)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return False
        fh.seek(0)
        data = fh.read()
        fh.truncate(data.rfind(b"\n") + 1)
        fh.flush()
        os.fsync(fh.fileno())
    return True


# ------------------------------------------------------------------------------------------ readers
# Every file a user hands the harness (configs, templates, contexts, sheets) and every run-directory
# artifact is read through these: one UserError line naming the file for a missing file, a folder, a
# file over its size limit (checked before reading), text that is not UTF-8 (a BOM is fine) or JSON of
# the wrong shape. Nothing is quoted from the file's content.

MiB = 1024 * 1024
MAX_CONFIG_BYTES = 256 * 1024  # a YAML config: task, persona card or group, system, judge, rubric, examples
MAX_CONTEXTS_BYTES = 64 * MiB  # a user-written contexts file in JSON Lines (loader jsonl)
MAX_CONTEXTS_YAML_BYTES = 4 * MiB  # a contexts file in YAML (loader demo): YAML parses far slower than JSON
MAX_SHEET_BYTES = 32 * MiB  # a filled human-rating sheet or its key.json


def warn(message: str) -> None:
    """One warning line on stderr (for tolerated problems: the caller says what was dropped)."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


_WARNED: set[tuple[str, int, int]] = set()


def _warn_once(path: Path, message: str) -> None:
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        key = (str(path), -1, -1)
    if key not in _WARNED:
        _WARNED.add(key)
        warn(message)


def read_bytes(path: str | os.PathLike[str], *, what: str = "a file", limit: int | None = None) -> bytes:
    """The file's bytes; UserError when it is missing, a folder or larger than ``limit`` (before reading)."""
    from .errors import UserError

    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UserError(f"{path}: file not found; expected {what}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc}); expected {what}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a folder; expected {what}")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file; expected {what}")
    if limit is not None and st.st_size > limit:
        raise UserError(f"{path}: {st.st_size:,} bytes is over the {limit:,}-byte limit for {what}; split it or shorten it")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc}); expected {what}") from None


def decode_text(data: bytes, path: str | os.PathLike[str], *, what: str = "a file") -> str:
    """UTF-8 (with or without a byte-order mark) -> str; anything else is one UserError line."""
    from .errors import UserError

    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(f"{path}:{line}: not UTF-8 text (byte {exc.start}); save {what} as UTF-8") from None


def read_text(path: str | os.PathLike[str], *, what: str = "a file", limit: int | None = None, allow_empty: bool = True) -> str:
    """A user-facing text file as str (UTF-8, a BOM is dropped); see :func:`read_bytes`."""
    from .errors import UserError

    text = decode_text(read_bytes(path, what=what, limit=limit), path, what=what)
    if not allow_empty and not text.strip():
        raise UserError(f"{path}: empty file; expected {what}")
    return text


def read_json_object(path: str | os.PathLike[str], *, what: str = "a JSON object", limit: int | None = None) -> dict[str, Any]:
    """A JSON file whose top level must be an object."""
    from .errors import UserError

    text = read_text(path, what=what, limit=limit, allow_empty=False)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); expected {what}") from None
    if not isinstance(obj, dict):
        raise UserError(f"{path}: top level is a JSON {_json_type(obj)}, expected an object ({what})")
    return obj


def _json_type(obj: Any) -> str:
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}.get(
        type(obj), type(obj).__name__
    )


def read_jsonl(
    path: str | os.PathLike[str], *, tolerate_truncated_tail: bool = True, what: str = "a JSON Lines file"
) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a run-directory JSONL file (absent file: nothing).

    A final line cut short by a crash (no newline, not valid JSON) is dropped with one warning line;
    any other bad line (not JSON, not an object, not UTF-8) is a UserError naming file and line.
    """
    from .errors import UserError

    path = Path(path)
    if not path.exists():
        return
    text = decode_text(read_bytes(path, what=what), path, what=what)
    lines = text.split("\n")
    complete = lines[-1] == ""
    if complete:
        lines.pop()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if tolerate_truncated_tail and i == len(lines) - 1 and not complete:
                _warn_once(path, f"{path}:{i + 1}: last line is cut off (an interrupted write); 1 line ignored")
                return
            raise UserError(f"{path}:{i + 1}: not valid JSON; fix or delete that line ({what})") from None
        if not isinstance(obj, dict):
            raise UserError(f"{path}:{i + 1}: a JSON {_json_type(obj)}, expected one object per line ({what})")
        yield obj


def confined_path(
    roots: Path | list[Path], name: Any, *, field: str, where: str, what: str = "file", follow_links: bool = True
) -> Path:
    """``root / name`` for the first root holding it (the last root when none does), refusing names
    that leave the root: absolute paths, ``..`` going above it, ``~``, and (``follow_links``) a
    symlink whose target lies outside it. Nothing is read. The error names ``where``, ``field`` and
    the allowed root(s)."""
    from .errors import UserError

    roots = [roots] if isinstance(roots, Path) else list(roots)
    allowed = " or ".join(str(r) for r in roots)
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{where}: field '{field}': give a relative path inside {allowed}")
    if "\x00" in name:
        raise UserError(f"{where}: field '{field}': the path contains a NUL byte; give a relative path inside {allowed}")
    rel = Path(name)
    if rel.is_absolute() or name.startswith("~"):
        raise UserError(f"{where}: field '{field}': absolute path {name!r} is not allowed; give a path relative to {allowed}")
    if _escapes(rel):
        raise UserError(f"{where}: field '{field}': {name!r} leaves {allowed}; give a path inside it")
    candidates = [r / rel for r in roots]
    chosen = next((c for c in candidates if c.exists()), candidates[-1])
    root = roots[candidates.index(chosen)]
    if follow_links and chosen.exists():
        if not chosen.resolve().is_relative_to(root.resolve()):
            raise UserError(f"{where}: field '{field}': {name!r} is a link that leads outside {root}; give a {what} inside it")
    return chosen


def _escapes(rel: Path) -> bool:
    depth = 0
    for part in rel.parts:
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in (".", ""):
            depth += 1
    return False


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def stable_hash(obj: Any, length: int = 16) -> str:
    """Hash of a JSON-serialisable object, independent of dict order."""
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]
