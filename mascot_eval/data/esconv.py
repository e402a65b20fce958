"""ESConv in thu-coai's processed JSONL form (``esconv/{train,valid,test}.txt``), one context per dialogue.

Each line: ``{"emotion_type", "problem_type", "situation", "dialog": [{"text", "speaker": "usr"|"sys",
"strategy" (sys only)}]}``. ``usr`` is the help-seeker, ``sys`` the supporter; turns keep the
dataset's roles and order (a speaker can have several consecutive turns). The supporter strategies
are kept in metadata, aligned with the turns (None for seeker turns).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..errors import UserError
from .context import Context, HumanTurn
from .jsonlines import iter_json_lines, require_keys
from .loaders import LOADERS, LoadedSource, Loader, SourceRef
from .sources import locate

KEYS = ("emotion_type", "problem_type", "situation", "dialog")
WHAT = "the ESConv processed JSONL split"


class ESConvLoader(Loader):
    name = "esconv"
    domain = "emotional"
    description = "ESConv emotional-support dialogues (thu-coai processed split), one context per dialogue"
    default_path = "esconv/test.txt"
    filters = {
        "emotion": ("emotion_type, e.g. anxiety, depression, sadness", lambda c: c.emotion),
        "problem": ("problem_type, e.g. job crisis, breakup with partner", lambda c: c.problem),
    }

    def read(self, ref: SourceRef) -> LoadedSource:
        self.check_options(ref)
        found = locate(self.name, ref.path or self.default_path, ref.data_dir, where=ref.where)
        path = found.path
        split = path.stem
        contexts: list[Context] = []
        for lineno, d in iter_json_lines(path, WHAT):
            require_keys(path, lineno, d, KEYS, WHAT)
            if not isinstance(d["dialog"], list) or not d["dialog"]:
                raise UserError(f"{path}:{lineno}: 'dialog' must be a non-empty list of turns; this is not {WHAT}")
            turns: list[HumanTurn] = []
            strategies: list[str | None] = []
            for t in d["dialog"]:
                if not isinstance(t, dict) or t.get("speaker") not in ("usr", "sys") or not isinstance(t.get("text"), str):
                    raise UserError(f"{path}:{lineno}: a turn lacks text or has a speaker other than usr/sys; this is not {WHAT}")
                turns.append(HumanTurn(t["speaker"], t["text"]))
                strategies.append(t.get("strategy"))
            contexts.append(
                Context(
                    id=f"esconv-{split}-{lineno:04d}",
                    source="esconv",
                    domain="emotional",
                    situation=str(d["situation"]).strip(),
                    emotion=str(d["emotion_type"]).strip().lower(),
                    problem=str(d["problem_type"]).strip(),
                    turns=turns,
                    user_speaker="usr",
                    metadata={"split": split, "line": lineno, "strategies": strategies},
                )
            )
        return LoadedSource(contexts, files=[path], origin=found.origin)

    def stats(self, contexts: list[Context]) -> dict[str, Any]:
        return {
            "dialogues": len(contexts),
            "turns": sum(len(c.turns) for c in contexts),
            "emotions": dict(Counter(c.emotion for c in contexts).most_common()),
        }


LOADERS.add("esconv", ESConvLoader)
