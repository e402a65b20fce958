"""A scripted, checkable judge (``mode: rules``): every score is a deterministic function of the text.

For demonstrating and testing training (``baselines/train/tiny.yaml`` optimises it, ``mascot-eval run
--judges checks`` measures it) and as a sanity check beside LLM judges: no model is called, a rerun
gives the same scores, and every score can be recomputed by hand from its rationale.

Each agent turn passes or fails five checks, one per agent criterion (the rubric's names, so the
rows fit every table):

- ``emotion``: names a feeling (a word from ``feeling_words``);
- ``empathy``: takes up the user's own words (shares a content word of at least 4 letters with the
  latest user turn, stop words excluded);
- ``consistency``: the persona's own check from ``persona`` (e.g. the Catalyst asks a question, the
  Beacon names a strength); a persona without a check passes;
- ``relevance``: between ``min_words`` and ``max_words`` words and ends a sentence;
- ``contribution``: adds something new: at most ``max_overlap`` of its word bigrams occur in the
  latest user turn or in an earlier agent turn of the same round.

Agent level: score = 1 + 4 x (share of the agent's turns that pass). Group level (per dialogue):
fidelity = share of all agent turns passing their persona check, originality = share passing
``contribution``, relevance = share passing ``relevance``, engagement = share of rounds in which some
agent asks the user a question; score = 1 + 4 x share. Scores are continuous in 1-5; ``weighted_score``
equals ``score``; the rationale lists the failed checks.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..criteria import AGENT_CRITERIA, GROUP_CRITERIA

_WORD = re.compile(r"[a-z0-9']+")
_END = re.compile(r"[.!?…)\"'”’]\s*$")
STOP = frozenset(
    "about after again also been before being could does doing down from have having here into just like made make more "
    "most much must only other over really same should some such than that their them then there these they this those "
    "very want were what when where which while will with would your yours you're i'm it's that's don't can't".split()
)


class PersonaCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["question", "words"] = Field(description="question: the turn contains '?'; words: it contains one of words")
    words: list[str] = Field(default_factory=list, description="lower-case words or short phrases (kind: words)")
    label: str = Field("", description="what the check means, shown in rationales")


class RulesSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_words: int = Field(4, ge=1)
    max_words: int = Field(30, ge=1)
    max_overlap: float = Field(0.5, ge=0.0, le=1.0, description="contribution: largest share of repeated word bigrams")
    feeling_words: list[str] = Field(min_length=1)
    persona: dict[str, PersonaCheck] = Field(default_factory=dict, description="persona id -> its check")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _bigrams(text: str) -> set[tuple[str, str]]:
    w = words(text)
    return set(zip(w, w[1:]))


def _has_any(text: str, vocab: list[str]) -> bool:
    low = " " + " ".join(words(text)) + " "
    return any(f" {' '.join(words(v))} " in low for v in vocab if words(v))


def overlap(text: str, earlier: list[str]) -> float:
    """Largest share of ``text``'s word bigrams found in one of ``earlier`` (0 without bigrams)."""
    mine = _bigrams(text)
    if not mine or not earlier:
        return 0.0
    return max(len(mine & _bigrams(e)) / len(mine) for e in earlier)


def persona_pass(rules: RulesSpec, persona_id: str | None, text: str) -> bool:
    check = rules.persona.get(persona_id or "")
    if check is None:
        return True
    if check.kind == "question":
        return "?" in text
    return _has_any(text, check.words)


def turn_checks(
    rules: RulesSpec, persona_id: str | None, text: str, user_text: str, earlier_agents: list[str]
) -> dict[str, bool]:
    """The five checks of one agent turn (criterion -> passed)."""
    w = words(text)
    user_content = {x for x in words(user_text) if len(x) >= 4 and x not in STOP}
    return {
        "emotion": _has_any(text, rules.feeling_words),
        "empathy": bool(user_content & set(w)),
        "consistency": persona_pass(rules, persona_id, text),
        "relevance": rules.min_words <= len(w) <= rules.max_words and bool(_END.search(text.strip())),
        "contribution": bool(w) and overlap(text, [user_text, *earlier_agents]) <= rules.max_overlap,
    }


def _score(passed: list[bool]) -> float:
    return 1.0 + 4.0 * (sum(passed) / len(passed))


def _why(fails: dict[str, int], total: int) -> str:
    if not any(fails.values()):
        return f"all checks passed ({total} turn{'s' if total != 1 else ''})"
    return "; ".join(f"{c}: failed in {n} of {total}" for c, n in fails.items() if n)


def _turn_views(turns: list[Any]) -> list[tuple[int, str, str, str, list[str]]]:
    """(round, speaker, text, latest user text, earlier agent texts of the round) per agent turn."""
    out: list[tuple[int, str, str, str, list[str]]] = []
    user_text, rnd = "", None
    earlier: list[str] = []
    for t in turns:
        if t.round != rnd:
            rnd, earlier = t.round, []
        if t.speaker == "user":
            user_text, earlier = t.text, []
            continue
        out.append((t.round, t.speaker, t.text, user_text, list(earlier)))
        earlier.append(t.text)
    return out


def score_transcript(
    rules: RulesSpec, t: Any, level: str, agent: str | None, persona_ids: dict[str, str]
) -> tuple[dict[str, float], str] | None:
    """Scores of one unit (agent level: one agent; group: the dialogue); None when the unit has no agent turn."""
    views = _turn_views(t.turns)
    if level == "agent":
        mine = [v for v in views if v[1] == agent]
        if not mine:
            return None
        checks = [turn_checks(rules, persona_ids.get(agent or ""), text, u, e) for _, _, text, u, e in mine]
        scores = {c: _score([ch[c] for ch in checks]) for c in AGENT_CRITERIA}
        fails = {c: sum(not ch[c] for ch in checks) for c in AGENT_CRITERIA}
        return scores, _why(fails, len(checks))
    if not views:
        return None
    checks = [turn_checks(rules, persona_ids.get(sp), text, u, e) for _, sp, text, u, e in views]
    rounds: dict[int, bool] = {}
    for rnd, _, text, _, _ in views:
        rounds[rnd] = rounds.get(rnd, False) or "?" in text
    parts = {
        "fidelity": [ch["consistency"] for ch in checks],
        "originality": [ch["contribution"] for ch in checks],
        "relevance": [ch["relevance"] for ch in checks],
        "engagement": list(rounds.values()),
    }
    scores = {c: _score(parts[c]) for c in GROUP_CRITERIA}
    fails = {c: sum(not x for x in parts[c]) for c in GROUP_CRITERIA}
    return scores, "; ".join(f"{c}: {len(parts[c]) - fails[c]} of {len(parts[c])} passed" for c in GROUP_CRITERIA)


def score_reply(rules: RulesSpec, persona_id: str, history: list[dict[str, str]], response: str) -> tuple[dict[str, float], str]:
    """Agent-level scores of one candidate reply after ``history`` (``[{"name" or "role", "content"}]``)."""
    user_text = ""
    earlier: list[str] = []
    for m in history:
        who = (m.get("name") or m.get("speaker") or m.get("role") or "").lower()
        if who == "user":
            user_text, earlier = str(m.get("content", "")), []
        else:
            earlier.append(str(m.get("content", "")))
    checks = turn_checks(rules, persona_id, response, user_text, earlier)
    return {c: _score([checks[c]]) for c in AGENT_CRITERIA}, _why({c: int(not v) for c, v in checks.items()}, 1)
