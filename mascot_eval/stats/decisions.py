"""How each system's decisions were made, from transcripts alone (counts, shares, distributions).

The Director (``mascot`` and its ablations) and MultiAgentESC record the source of every decision
(``constrained``: choice scoring or a JSON schema, valid by construction; ``parsed``: free text,
valid at once; ``reasked``: valid after one re-ask; ``fallback``: the documented fallback) in
``transcript.stats`` and in each turn's directive / meta. :func:`decision_stats` rolls them up per
system label; :func:`fallback_warnings` turns a too-high fallback share into warning lines.

A Director that always falls back plays the fixed fallback order (group order), so
:func:`decision_stats` also reports how often the spoken order of a round differs from that
round-robin order (the first k agents of the group, for a round where k agents spoke).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

SOURCES = ("constrained", "parsed", "reasked", "fallback")
DEFAULT_MAX_FALLBACK_SHARE = 0.1


def _items(transcripts: Iterable[Any]) -> Iterable[tuple[str, Any]]:
    """Accepts Transcripts or (run_id, Transcript) pairs (RunData.transcripts)."""
    for t in transcripts:
        if isinstance(t, tuple):
            yield t[0], t[1]
        else:
            yield "", t


def _share(k: int, n: int) -> float | None:
    return k / n if n else None


def _counts(c: Counter) -> dict[str, int]:
    return {k: int(v) for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0])))}


def decision_stats(transcripts: Iterable[Any], labels: dict[tuple[str, str], str] | None = None) -> dict[str, dict[str, Any]]:
    """Per system label: ``{"dialogues", "director": {...} or None, "multiagentesc": {...} or None}``.

    ``director``: ``mode`` (mode -> dialogues), ``decisions``, ``sources`` (source -> count),
    ``valid``, ``valid_share`` (valid = not a fallback), ``fallbacks``, ``fallback_share``,
    ``round_ends``, ``invalid_reasons``, ``speakers`` / ``first_speakers`` / ``actions`` / ``tones``
    (value -> turns), ``rounds``, ``rounds_not_round_robin`` and its share, ``speakers_per_round``
    (k -> rounds). ``multiagentesc``: ``mode``, ``strategy_sources``, ``vote_sources`` (with
    decisions, valid shares), ``strategies`` (chosen strategy -> turns), ``selection_fallbacks``.
    Labels default to the system name; pass ``RunData.labels`` to keep runs apart.
    """
    out: dict[str, dict[str, Any]] = {}
    for run_id, t in _items(transcripts):
        label = (labels or {}).get((run_id, t.system), t.system)
        row = out.setdefault(label, {"system": t.system, "dialogues": 0, "director": None, "multiagentesc": None})
        row["dialogues"] += 1
        d = (t.stats or {}).get("director")
        if d is not None:
            agg = row["director"] or {
                "mode": Counter(),
                "decisions": 0,
                "sources": Counter({s: 0 for s in SOURCES}),
                "round_ends": 0,
                "invalid_reasons": Counter(),
                "speakers": Counter(),
                "first_speakers": Counter(),
                "actions": Counter(),
                "tones": Counter(),
                "rounds": 0,
                "rounds_not_round_robin": 0,
                "speakers_per_round": Counter(),
            }
            row["director"] = agg
            agg["mode"][d.get("mode") or "text"] += 1
            agg["decisions"] += int(d.get("decisions", 0))
            agg["round_ends"] += int(d.get("round_ends", 0))
            agg["invalid_reasons"].update(d.get("invalid_reasons") or {})
            src = d.get("sources")
            if src is None:  # transcripts written before sources were recorded
                src = {
                    "parsed": d.get("valid_first", 0),
                    "reasked": d.get("valid_after_reask", 0),
                    "fallback": d.get("fallbacks", 0),
                }
            agg["sources"].update({k: int(v) for k, v in src.items()})
            for _rnd, turns in sorted(t.rounds().items()):
                spoken = [x.speaker for x in turns if not x.is_user]
                if not spoken:
                    continue
                agg["rounds"] += 1
                agg["speakers_per_round"][len(spoken)] += 1
                agg["first_speakers"][spoken[0]] += 1
                if spoken != list(t.agents[: len(spoken)]):
                    agg["rounds_not_round_robin"] += 1
            for x in t.agent_turns:
                agg["speakers"][x.speaker] += 1
                if x.directive:
                    agg["actions"][x.directive.get("action", "")] += 1
                    agg["tones"][x.directive.get("tone", "")] += 1
        m = (t.stats or {}).get("multiagentesc")
        if m is not None:
            agg = row["multiagentesc"] or {
                "mode": Counter(),
                "strategy_sources": Counter({s: 0 for s in SOURCES}),
                "vote_sources": Counter({s: 0 for s in SOURCES}),
                "strategies": Counter(),
                "selection_fallbacks": 0,
            }
            row["multiagentesc"] = agg
            agg["mode"][m.get("mode") or "text"] += 1
            agg["selection_fallbacks"] += int(m.get("selection_fallbacks", 0))
            if "strategy_sources" in m:
                agg["strategy_sources"].update(m["strategy_sources"])
                agg["vote_sources"].update(m["vote_sources"])
            else:  # older transcripts: only the fallback counters
                n_turns = len(t.agent_turns)
                n_votes = sum(len(x.meta.get("votes") or {}) for x in t.agent_turns)
                agg["strategy_sources"].update(
                    {"fallback": m.get("strategy_fallbacks", 0), "parsed": n_turns - m.get("strategy_fallbacks", 0)}
                )
                agg["vote_sources"].update({"fallback": m.get("invalid_votes", 0), "parsed": n_votes - m.get("invalid_votes", 0)})
            for x in t.agent_turns:
                if x.meta.get("strategy"):
                    agg["strategies"][x.meta["strategy"]] += 1
    for row in out.values():
        d = row["director"]
        if d is not None:
            fb = int(d["sources"]["fallback"])
            n = d["decisions"]
            row["director"] = {
                "mode": dict(d["mode"]),
                "decisions": n,
                "sources": {s: int(d["sources"][s]) for s in SOURCES},
                "valid": n - fb,
                "valid_share": _share(n - fb, n),
                "fallbacks": fb,
                "fallback_share": _share(fb, n),
                "round_ends": d["round_ends"],
                "invalid_reasons": _counts(d["invalid_reasons"]),
                "speakers": _counts(d["speakers"]),
                "first_speakers": _counts(d["first_speakers"]),
                "actions": _counts(d["actions"]),
                "tones": _counts(d["tones"]),
                "rounds": d["rounds"],
                "rounds_not_round_robin": d["rounds_not_round_robin"],
                "not_round_robin_share": _share(d["rounds_not_round_robin"], d["rounds"]),
                "speakers_per_round": {str(k): v for k, v in sorted(d["speakers_per_round"].items())},
            }
        m = row["multiagentesc"]
        if m is not None:
            out_m: dict[str, Any] = {
                "mode": dict(m["mode"]),
                "strategies": _counts(m["strategies"]),
                "selection_fallbacks": m["selection_fallbacks"],
            }
            for key in ("strategy_sources", "vote_sources"):
                c = {s: int(m[key][s]) for s in SOURCES}
                n = sum(c.values())
                out_m[key] = c
                out_m[key.replace("_sources", "_decisions")] = n
                out_m[key.replace("_sources", "_valid_share")] = _share(n - c["fallback"], n)
            row["multiagentesc"] = out_m
    return dict(sorted(out.items()))


def fallback_warnings(stats: dict[str, dict[str, Any]], max_share: float = DEFAULT_MAX_FALLBACK_SHARE) -> list[str]:
    """One warning line per system whose decisions fell back on more than ``max_share`` of them
    (``stats`` from :func:`decision_stats`); empty when none did."""
    lines = []
    for label, row in stats.items():
        d = row.get("director")
        if d and d["decisions"] and d["fallback_share"] > max_share:
            lines.append(
                f"warning: the Director of {label} fell back on {d['fallbacks']} of {d['decisions']} decisions "
                f"({d['fallback_share']:.0%}, above {max_share:.0%}); those turns follow the fixed fallback order, "
                f"not the Director (mode {', '.join(d['mode'])}; see stats.director.invalid_reasons)"
            )
        m = row.get("multiagentesc")
        if m:
            for what in ("strategy", "vote"):
                n, c = m[f"{what}_decisions"], m[f"{what}_sources"]["fallback"]
                if n and c / n > max_share:
                    lines.append(
                        f"warning: {label} fell back on {c} of {n} {what} decisions ({c / n:.0%}, above "
                        f"{max_share:.0%}; mode {', '.join(m['mode'])})"
                    )
    return lines


def decision_rows(stats: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat rows (one per system and decision kind) for tables and summary.json."""
    rows = []
    for label, row in stats.items():
        d = row.get("director")
        if d:
            rows.append(
                {
                    "system": label,
                    "decision": "director",
                    "mode": ",".join(d["mode"]),
                    "decisions": d["decisions"],
                    **{s: d["sources"][s] for s in SOURCES},
                    "valid_share": d["valid_share"],
                    "not_round_robin": f"{d['rounds_not_round_robin']}/{d['rounds']}",
                }
            )
        m = row.get("multiagentesc")
        if m:
            for what in ("strategy", "vote"):
                rows.append(
                    {
                        "system": label,
                        "decision": what,
                        "mode": ",".join(m["mode"]),
                        "decisions": m[f"{what}_decisions"],
                        **{s: m[f"{what}_sources"][s] for s in SOURCES},
                        "valid_share": m[f"{what}_valid_share"],
                        "not_round_robin": "",
                    }
                )
    return rows
