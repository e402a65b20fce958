"""EmpatheticDialogues from the raw release CSV (``empatheticdialogues/{train,valid,test}.csv``).

The raw files are not clean CSV. Like the reference loader (facebookresearch/ParlAI) this parser
splits each physical line on ``,`` and reads fields 0-7, which gives the paper's conversation counts
(test: 2,547 ``conv_id``; a quote-aware CSV reader merges lines and finds 2,542). Quirks handled:

1. mixed line ends: most lines end in CRLF, malformed ones in LF only (a trailing CR is dropped);
2. extra trailing fields after ``tags`` (``|``-separated candidate replies): ignored, counted;
3. CSV-quoted fields with doubled quotes (``"... ""gut"" ..."``): outer quotes removed, ``""`` -> ``"``;
4. a stray unmatched opening quote (``"My grandpa is coming to visit!``): the stray quote is removed;
5. ``_comma_`` in ``prompt`` and ``utterance``: replaced by ``,``.

A context is one conversation: id = ``conv_id``, emotion = ``context`` column, valence from the
valence table, situation = ``prompt``, turns = the utterances in ``utterance_idx`` order with the
dataset's roles (odd index = ``speaker``, who wrote the situation; even = ``listener``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import UserError
from .context import Context, HumanTurn
from .loaders import LOADERS, LoadedSource, Loader, SourceRef
from .sources import locate
from .valence import default_table_path, load_valence_table

HEADER = "conv_id,utterance_idx,context,prompt,speaker_idx,utterance,selfeval,tags"
N_FIELDS = 8


def clean_field(raw: str) -> tuple[str, str | None]:
    """Undo the release's quoting and comma escapes; returns (text, quirk name or None)."""
    quirk = None
    text = raw
    if len(text) >= 2 and text.startswith('"') and text.endswith('"'):
        text = text[1:-1].replace('""', '"')
        quirk = "quoted"
    elif text.startswith('"'):
        text = text[1:]
        quirk = "stray_quote"
    return text.replace("_comma_", ",").strip(), quirk


def parse_ed_csv(path: Path, valence: dict[str, str], valence_file: str) -> tuple[list[Context], dict[str, int]]:
    """Parse one raw ED CSV into conversations (source order) and a count of each quirk met."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 (byte {exc.start}); this is not the raw EmpatheticDialogues CSV") from None
    lines = text.split("\n")
    ends_with_newline = lines[-1] == ""
    if ends_with_newline:
        lines.pop()
    if not lines:
        raise UserError(f"{path}: empty file; re-download the EmpatheticDialogues release")
    header = lines[0].rstrip("\r").lstrip("\ufeff")
    if header != HEADER:
        raise UserError(
            f"{path}:1: header is {header[:80]!r}, expected {HEADER!r}; point source.path at the raw EmpatheticDialogues CSV"
        )
    quirks: Counter[str] = Counter()
    split = path.stem
    convs: dict[str, dict[str, Any]] = {}
    last = len(lines)
    for lineno, line in enumerate(lines[1:], 2):
        if line.endswith("\r"):
            line = line[:-1]
            quirks["crlf"] += 1
        else:
            quirks["lf_only"] += 1
        if not line.strip():
            continue
        parts = line.split(",")
        if len(parts) < N_FIELDS:
            hint = "the file is truncated" if (lineno == last and not ends_with_newline) else "the row is damaged"
            raise UserError(
                f"{path}:{lineno}: {len(parts)} comma-separated fields, expected {N_FIELDS} "
                f"({HEADER}); {hint}: re-download the EmpatheticDialogues release"
            )
        if len(parts) > N_FIELDS:
            quirks["extra_fields"] += 1
        conv_id, idx_s, label, prompt_raw, speaker_id, utt_raw, selfeval, tags = parts[:N_FIELDS]
        try:
            idx = int(idx_s)
        except ValueError:
            raise UserError(
                f"{path}:{lineno}: utterance_idx {idx_s[:30]!r} is not an integer; "
                f"the row is damaged: re-download the EmpatheticDialogues release"
            ) from None
        if not conv_id.startswith("hit:"):
            raise UserError(
                f"{path}:{lineno}: conv_id {conv_id[:30]!r} does not look like 'hit:<n>_conv:<m>'; "
                f"the row is damaged: re-download the EmpatheticDialogues release"
            )
        utt, q1 = clean_field(utt_raw)
        if q1:
            quirks[q1] += 1
        conv = convs.get(conv_id)
        if conv is None:
            prompt, q2 = clean_field(prompt_raw)
            if q2:
                quirks[q2] += 1
            emotion = label.strip().lower()
            if emotion not in valence:
                raise UserError(
                    f"{path}:{lineno}: emotion {emotion!r} is not in the valence table {valence_file}; add a row for it"
                )
            conv = convs[conv_id] = {
                "line": lineno,
                "emotion": emotion,
                "prompt": prompt,
                "turns": {},
                "speaker_ids": [],
                "selfeval": selfeval,
                "tags": set(),
            }
        elif prompt_raw.startswith('"'):
            quirks["quoted"] += 1  # repeated quoted prompt on later rows
        if idx in conv["turns"]:
            raise UserError(f"{path}:{lineno}: {conv_id} repeats utterance_idx {idx}; the file is damaged: re-download it")
        conv["turns"][idx] = utt
        if speaker_id not in conv["speaker_ids"]:
            conv["speaker_ids"].append(speaker_id)
        if tags.strip():
            conv["tags"].update(tags.split())
    contexts: list[Context] = []
    for conv_id, c in convs.items():
        turns = [HumanTurn("speaker" if i % 2 == 1 else "listener", c["turns"][i]) for i in sorted(c["turns"])]
        contexts.append(
            Context(
                id=conv_id,
                source="empathetic_dialogues",
                domain="emotional",
                situation=c["prompt"],
                emotion=c["emotion"],
                valence=valence[c["emotion"]],
                turns=turns,
                user_speaker="speaker",
                metadata={
                    "split": split,
                    "line": c["line"],
                    "speaker_ids": c["speaker_ids"],
                    "selfeval": c["selfeval"],
                    "tags": sorted(c["tags"]),
                },
            )
        )
    return contexts, dict(quirks)


class EmpatheticDialoguesLoader(Loader):
    name = "empathetic_dialogues"
    domain = "emotional"
    description = "EmpatheticDialogues raw CSV (one context per conversation), split by valence"
    default_path = "empathetic_dialogues/test.csv"
    filters = {
        "valence": ("positive / negative / neutral (from the valence table)", lambda c: c.valence),
        "emotion": ("one of the 32 emotion labels", lambda c: c.emotion),
    }
    options = {
        "valence_table": ("label,valence CSV, a path inside the task file's folder or the tasks folders", None),
    }

    def read(self, ref: SourceRef) -> LoadedSource:

        opts = self.check_options(ref)
        table_opt = opts["valence_table"]
        if table_opt is None:
            table_path = default_table_path()
        else:
            from .userfiles import task_relative

            table_path = task_relative(ref, table_opt, field="source.options.valence_table", what="valence table")
        valence = load_valence_table(table_path)
        found = locate(self.name, ref.path or self.default_path, ref.data_dir, where=ref.where)
        contexts, quirks = parse_ed_csv(found.path, valence, str(table_path))
        return LoadedSource(contexts, files=[found.path, table_path], origin=found.origin, notes={"quirks": quirks})

    def stats(self, contexts: list[Context]) -> dict[str, Any]:
        return {
            "conversations": len(contexts),
            "emotions": len({c.emotion for c in contexts}),
            "valence": dict(sorted(Counter(c.valence for c in contexts).items())),
        }


LOADERS.add("empathetic_dialogues", EmpatheticDialoguesLoader)
