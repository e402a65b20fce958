"""The transcript format: what every system writes and everything downstream reads.

The record types live in :mod:`mascot_eval.records.transcript` (schema ``mascot-transcript/2``);
this module keeps the historical import path. See docs/systems.md, "Transcript format".
"""

from __future__ import annotations

from .records import json_schema
from .records.transcript import (
    OLD_SCHEMAS,
    SCHEMA,
    USER,
    AgentInfo,
    PlayedPersona,
    SystemInfo,
    Transcript,
    Turn,
    make_dialogue_id,
    validate,
)

JSON_SCHEMA = json_schema("transcript")

__all__ = [
    "JSON_SCHEMA",
    "OLD_SCHEMAS",
    "SCHEMA",
    "USER",
    "AgentInfo",
    "PlayedPersona",
    "SystemInfo",
    "Transcript",
    "Turn",
    "make_dialogue_id",
    "validate",
]
