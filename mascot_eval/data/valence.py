"""The emotion-label -> valence table (a user-swappable CSV file, not code).

Format: UTF-8 CSV with the header ``label,valence``; lines starting with ``#`` are comments.
Each label appears once; valence is ``positive``, ``negative`` or ``neutral``.
The shipped table is ``tasks/data/ed_valence.csv``.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

from .. import paths
from ..errors import UserError

VALENCES: tuple[str, ...] = ("positive", "negative", "neutral")
DEFAULT_TABLE = "data/ed_valence.csv"  # relative to the tasks folder


def default_table_path() -> Path:
    """tasks/data/ed_valence.csv of the user folder if it has one, else the shipped table."""
    return paths.find("tasks", DEFAULT_TABLE) or paths.tasks_dir() / DEFAULT_TABLE


def load_valence_table(path: str | Path | None = None) -> dict[str, str]:
    """Return ``{label: valence}``; every problem is a one-line :class:`UserError` naming file and line."""
    p = Path(path) if path is not None else default_table_path()
    if not p.is_file():
        raise UserError(f"{p}: valence table not found; point the task option 'valence_table' at a label,valence CSV")
    st = p.stat()
    return dict(_load(str(p.resolve()), st.st_size, st.st_mtime_ns))


@lru_cache(maxsize=8)
def _load(path: str, _size: int, _mtime: int) -> tuple[tuple[str, str], ...]:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark is fine
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; save the valence table as UTF-8") from None
    numbered = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        raise UserError(f"{path}: empty valence table; add the header 'label,valence' and one row per emotion label")
    rows = list(csv.reader([line for _, line in numbered]))
    header_line, header = numbered[0][0], [c.strip() for c in rows[0]]
    if header != ["label", "valence"]:
        raise UserError(f"{path}:{header_line}: header is {','.join(header)!r}, expected 'label,valence'")
    table: dict[str, str] = {}
    for (lineno, _), row in zip(numbered[1:], rows[1:]):
        if len(row) != 2:
            raise UserError(f"{path}:{lineno}: expected 2 fields (label,valence), got {len(row)}")
        label, valence = row[0].strip().lower(), row[1].strip().lower()
        if not label:
            raise UserError(f"{path}:{lineno}: empty label")
        if valence not in VALENCES:
            raise UserError(f"{path}:{lineno}: valence {row[1].strip()!r} for {label!r} must be one of {', '.join(VALENCES)}")
        if label in table:
            raise UserError(f"{path}:{lineno}: label {label!r} appears twice; keep one row per label")
        table[label] = valence
    return tuple(table.items())
