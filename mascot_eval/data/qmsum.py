"""QMSum meetings (``<dir>/{Academic,Committee,Product}/jsonl/<split>.jsonl``), one context per query.

Every general and specific query of a meeting becomes a workplace context: situation and query =
the query text; turns = the transcript excerpt the query is about (the union of its
``relevant_text_span`` ranges, inclusive ends; for general queries, which have no span, the meeting
from its start), capped at ``excerpt_turns`` turns (the uncapped length is kept in metadata);
participants = the speakers of the excerpt; ``meeting_domain`` = Academic / Committee / Product.
QMSum's transcript markup (``{vocalsound}``, ``{disfmarker}``, ``{pause}``, ``{gap}``, ...) is
removed unless ``clean_markup: false``. The reference answer stays in metadata (for judges, not users).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import UserError
from .context import Context, HumanTurn
from .jsonlines import iter_json_lines, require_keys
from .loaders import LOADERS, LoadedSource, Loader, SourceRef
from .sources import locate

DOMAINS: tuple[str, ...] = ("Academic", "Committee", "Product")
KEYS = ("topic_list", "general_query_list", "specific_query_list", "meeting_transcripts")
WHAT = "a QMSum JSONL file"
_MARKUP = re.compile(r"\{[a-z]+\}")
_SPACES = re.compile(r"\s+")


def clean_markup(text: str) -> str:
    return _SPACES.sub(" ", _MARKUP.sub(" ", text)).strip()


def _spans(path: Path, lineno: int, raw: Any, n_turns: int) -> list[tuple[int, int]]:
    out = []
    try:
        for start, end in raw:
            s, e = int(start), int(end)
            if not 0 <= s <= e < n_turns:
                raise ValueError(f"span [{s}, {e}] outside 0..{n_turns - 1}")
            out.append((s, e))
    except (TypeError, ValueError) as exc:
        raise UserError(f"{path}:{lineno}: bad relevant_text_span ({exc}); this is not {WHAT}") from None
    return out


def parse_meetings(path: Path, domain: str, *, excerpt_turns: int, markup: bool) -> tuple[list[Context], int]:
    """Contexts (one per query) of one QMSum file and its number of meetings."""
    split = path.stem
    contexts: list[Context] = []
    meetings = 0
    for lineno, m in iter_json_lines(path, WHAT):
        require_keys(path, lineno, m, KEYS, WHAT)
        meetings += 1
        transcript = m["meeting_transcripts"]
        turns_all = [
            HumanTurn(str(t.get("speaker", "")), clean_markup(str(t.get("content", ""))) if markup else str(t.get("content", "")))
            for t in transcript
        ]
        topics = [t.get("topic", "") for t in m["topic_list"]]
        queries: list[tuple[str, int, dict[str, Any]]] = [("general", i, q) for i, q in enumerate(m["general_query_list"])]
        queries += [("specific", i, q) for i, q in enumerate(m["specific_query_list"])]
        for qtype, qi, q in queries:
            if "query" not in q:
                raise UserError(f"{path}:{lineno}: a {qtype} query has no 'query' key; this is not {WHAT}")
            if qtype == "specific":
                spans = _spans(path, lineno, q.get("relevant_text_span", []), len(turns_all))
                idx = sorted({i for s, e in spans for i in range(s, e + 1)})
            else:
                spans = []
                idx = list(range(len(turns_all)))
            idx_kept = [i for i in idx if turns_all[i].text][:excerpt_turns]
            excerpt = [turns_all[i] for i in idx_kept]
            participants = list(dict.fromkeys(t.speaker for t in excerpt))
            contexts.append(
                Context(
                    id=f"qmsum-{domain.lower()}-{split}-m{meetings:02d}-{qtype[0]}{qi + 1:02d}",
                    source="qmsum",
                    domain="workplace",
                    situation=q["query"].strip(),
                    query=q["query"].strip(),
                    meeting_domain=domain,
                    participants=participants,
                    turns=excerpt,
                    user_speaker="user",  # the user is not a meeting participant: no opening line
                    metadata={
                        "split": split,
                        "meeting": meetings,
                        "line": lineno,
                        "query_type": qtype,
                        "spans": [list(s) for s in spans],
                        "excerpt_turns_total": len(idx),
                        "excerpt_first_turn": idx_kept[0] if idx_kept else None,
                        "topics": topics,
                        "reference_answer": q.get("answer", ""),
                    },
                )
            )
    return contexts, meetings


class QMSumLoader(Loader):
    name = "qmsum"
    domain = "workplace"
    description = "QMSum meeting transcripts (one context per general/specific query) by meeting domain"
    default_path = "qmsum"
    filters = {
        "domain": ("meeting domain: Academic / Committee / Product", lambda c: c.meeting_domain),
        "query_type": ("general / specific", lambda c: c.metadata.get("query_type")),
    }
    options = {
        "split": ("file name under <domain>/jsonl/ (test, val, train)", "test"),
        "excerpt_turns": ("most transcript turns kept per context", 40),
        "clean_markup": ("remove QMSum's {vocalsound}-style markup", True),
    }

    def read(self, ref: SourceRef) -> LoadedSource:
        opts = self.check_options(ref)
        if not isinstance(opts["excerpt_turns"], int) or opts["excerpt_turns"] < 1:
            raise UserError(f"{ref.where}: field 'source.options.excerpt_turns': give a whole number of turns >= 1")
        base = (ref.path or self.default_path).rstrip("/")
        contexts: list[Context] = []
        files: list[Path] = []
        origin = ""
        meetings: dict[str, int] = {}
        for domain in DOMAINS:
            found = locate(self.name, f"{base}/{domain}/jsonl/{opts['split']}.jsonl", ref.data_dir, where=ref.where)
            ctx, n = parse_meetings(found.path, domain, excerpt_turns=opts["excerpt_turns"], markup=bool(opts["clean_markup"]))
            contexts += ctx
            files.append(found.path)
            origin = origin or found.origin  # the first file tells whether this read downloaded
            meetings[domain] = n
        return LoadedSource(contexts, files=files, origin=origin, notes={"meetings": meetings})

    def stats(self, contexts: list[Context]) -> dict[str, Any]:
        meetings = {(c.meeting_domain, c.metadata["meeting"]) for c in contexts}
        return {
            "meetings": len(meetings),
            "queries": len(contexts),
            "by_domain": {
                d: {
                    "meetings": sum(1 for m in meetings if m[0] == d),
                    "queries": sum(1 for c in contexts if c.meeting_domain == d),
                }
                for d in sorted({c.meeting_domain for c in contexts if c.meeting_domain})
            },
            "query_types": dict(sorted(Counter(c.metadata["query_type"] for c in contexts).items())),
        }


LOADERS.add("qmsum", QMSumLoader)
