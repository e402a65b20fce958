"""The evaluation context: one human-grounded situation a dialogue starts from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class HumanTurn:
    speaker: str  # dataset's own role name, e.g. "speaker"/"listener", "usr"/"sys", or a meeting participant
    text: str


@dataclass
class Context:
    """A situation from a dataset (or written by us) that the simulated user brings to the system.

    ``id`` is unique within its source and stable across runs (e.g. the ED ``conv_id``).
    Fields a source does not have stay ``None``/empty.
    """

    id: str
    source: str  # loader name: empathetic_dialogues, qmsum, esconv, jsonl, demo
    domain: str  # "emotional" or "workplace"
    situation: str  # what the user is going through / the meeting topic or query
    emotion: str | None = None
    valence: str | None = None  # positive / negative / neutral
    problem: str | None = None  # ESConv problem type
    query: str | None = None  # QMSum query
    meeting_domain: str | None = None  # QMSum: Academic / Committee / Product
    participants: list[str] = field(default_factory=list)
    turns: list[HumanTurn] = field(default_factory=list)  # human turns (dialogue or transcript excerpt)
    metadata: dict[str, Any] = field(default_factory=dict)
    # which ``turns[].speaker`` is the person seeking support: ED "speaker", ESConv "usr", demo/jsonl "user";
    # QMSum sets "user" too (the user is not in the transcript, so there is no opening line)
    user_speaker: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Context:
        d = dict(d)
        d["turns"] = [HumanTurn(**t) for t in d.get("turns", [])]
        return cls(**d)

    @property
    def opening(self) -> str | None:
        """The user's opening line: the first turn by ``user_speaker`` (ED speaker, ESConv usr).

        None when the user has no turn (a QMSum excerpt). Without ``user_speaker``, the first turn.
        """
        if self.user_speaker is None:
            return self.turns[0].text if self.turns else None
        return next((t.text for t in self.turns if t.speaker == self.user_speaker), None)
