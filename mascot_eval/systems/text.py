"""Text helpers for model outputs: tolerant JSON extraction, reply cleaning, candidate similarity."""

from __future__ import annotations

import json
import re
from typing import Any

_WORD = re.compile(r"[a-z0-9']+")


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in ``text`` that parses, in order (braces inside strings respected)."""
    out: list[dict[str, Any]] = []
    i, n = 0, len(text)
    while i < n:
        start = text.find("{", i)
        if start < 0:
            break
        depth, in_str, esc, end = 0, False, False, -1
        for j in range(start, n):
            c = text[j]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    end = j
                    break
        if end < 0:
            break
        try:
            obj = json.loads(text[start : end + 1])
        except json.JSONDecodeError:
            i = start + 1
            continue
        if isinstance(obj, dict):
            out.append(obj)
        i = end + 1
    return out


def last_json_object(text: str) -> dict[str, Any] | None:
    objs = json_objects(text)
    return objs[-1] if objs else None


def clean_reply(text: str, speaker: str, others: list[str]) -> str:
    """Strip a leading "Name:" label and cut where the model starts writing someone else's turn."""
    t = text.strip()
    names = [speaker, *others, "User", "Assistant"]
    label = re.compile(r"^\s*\**\s*(" + "|".join(re.escape(n) for n in names) + r")\s*\**\s*:\s*", re.IGNORECASE)
    m = label.match(t)
    if m and m.group(1).lower() == speaker.lower():
        t = t[m.end() :]
    cut = re.compile(r"^\s*\**\s*(" + "|".join(re.escape(n) for n in names) + r")\s*\**\s*:", re.IGNORECASE | re.MULTILINE)
    m = cut.search(t)
    if m:
        t = t[: m.start()]
    return t.strip().strip('"').strip()


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def jaccard(a: str, b: str) -> float:
    wa, wb = words(a), words(b)
    if not wa and not wb:
        return 1.0
    return len(wa & wb) / len(wa | wb)


def most_consistent(candidates: list[str]) -> tuple[int, list[float]]:
    """Index of the candidate with the highest mean word-overlap (Jaccard) with the others (the medoid).

    Ties go to the lowest index; empty candidates score -1 so a real reply always wins.
    """
    if not candidates:
        raise ValueError("no candidates")
    scores: list[float] = []
    for i, c in enumerate(candidates):
        if not c.strip():
            scores.append(-1.0)
            continue
        others = [jaccard(c, o) for j, o in enumerate(candidates) if j != i]
        scores.append(sum(others) / len(others) if others else 1.0)
    best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
    return best, scores
