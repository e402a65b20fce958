"""The one JSON extractor: every JSON object embedded in model output, with its position.

Used wherever text from a model may hold a JSON answer (judge verdicts, Director directives,
training-time parsing): fenced blocks and prose around the object are fine.
"""

from __future__ import annotations

import json
from typing import Any


def json_objects(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Every top-level JSON object in ``text`` as (start, end, object), in order. Where an object does
    not parse, the scan goes on inside it, so a valid inner object is still found."""
    out: list[tuple[int, int, dict[str, Any]]] = []
    dec = json.JSONDecoder()
    i = 0
    while True:
        i = text.find("{", i)
        if i < 0:
            break
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        if isinstance(obj, dict):
            out.append((i, end, obj))
            i = end
        else:
            i += 1
    return out


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in ``text`` (None when there is none)."""
    objs = json_objects(text)
    return objs[-1][2] if objs else None
