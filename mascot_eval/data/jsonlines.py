"""Strict JSON Lines reading for dataset files: every line must parse; problems name file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..fileio import read_bytes


def iter_json_lines(path: Path, what: str, *, limit: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)``; a cut-off last line is reported as a truncated file.

    UTF-8 with or without a byte-order mark; ``limit`` (bytes) is checked before reading."""
    data = read_bytes(path, what=what, limit=limit)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(f"{path}:{bad_line}: not UTF-8 (byte {exc.start}); this is not {what}") from None
    lines = text.split("\n")
    complete = lines[-1] == ""
    if complete:
        lines.pop()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines) and not complete:
                raise UserError(f"{path}:{lineno}: last line is cut off (file truncated); re-download {what}") from None
            raise UserError(
                f"{path}:{lineno}: not valid JSON ({exc.msg}, column {exc.colno}); fix or re-download {what}"
            ) from None
        if not isinstance(obj, dict):
            raise UserError(f"{path}:{lineno}: expected a JSON object per line, got {type(obj).__name__} ({what})")
        yield lineno, obj


def require_keys(path: Path, lineno: int, obj: dict[str, Any], keys: tuple[str, ...], what: str) -> None:
    missing = [k for k in keys if k not in obj]
    if missing:
        raise UserError(f"{path}:{lineno}: missing key(s) {', '.join(missing)}; this is not {what}")
