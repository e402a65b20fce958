"""Human evaluation: blinded annotation sheets out, ratings back in as judgment rows.

``export`` writes into one folder:

- ``sheet.csv``: one row per item (an agent in a dialogue, or a dialogue as a whole), columns
  ``annotator,item_id,dialogue,level,agent,<criteria...>``; annotators fill their name and 1-5
  ratings (criteria that do not belong to the row's level stay empty);
- ``form.html``: a self-contained form (no network) with the dialogues, the same anchored rubric
  and radio buttons; it downloads a CSV in the sheet's format;
- ``rubric.md``: the rubric as text;
- ``key.json``: the unblinding key (item -> dialogue, system, ...). Do not send it to annotators.

``import_ratings`` reads filled sheets back (validating every cell) into judgment rows with
``judge = "human:<annotator>"``, so the agreement code treats humans like any other rater.
"""

from __future__ import annotations

import csv
import io
import json
import random
import secrets
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..criteria import AGENT_CRITERIA, GROUP_CRITERIA, criteria_for, to_100
from ..errors import UserError
from ..fileio import (
    MAX_SHEET_BYTES,
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    read_json_object,
    read_jsonl,
    read_text,
    stable_hash,
)
from ..runs.rundir import RunDir
from ..transcript import Transcript
from . import prompts
from .rubrics import load_rubric
from .specs import resolve_judge

KEY_SCHEMA = "mascot-human-key/1"
ALL_CRITERIA = tuple(dict.fromkeys([*AGENT_CRITERIA, *GROUP_CRITERIA]))
COLUMNS = ["annotator", "item_id", "dialogue", "level", "agent", *ALL_CRITERIA]


@dataclass
class ExportResult:
    out_dir: Path
    dialogues: int
    items: int


def _rubrics(judges_root: Path | None = None):
    spec = resolve_judge("local") if judges_root is None else resolve_judge("local", judges_root)
    root = spec.judges_root
    return {lv: load_rubric(root, spec.rubrics[lv], lv) for lv in ("agent", "group")}, root


def export(
    run_dirs: list[RunDir],
    out_dir: str | Path,
    *,
    levels: tuple[str, ...] = ("agent", "group"),
    limit: int | None = None,
    seed: int = 0,
    title: str | None = None,
) -> ExportResult:
    """Write blinded sheets for the transcripts of ``run_dirs`` (shuffled with ``seed``)."""
    from .threeway import load_for_compare

    ts: list[Transcript] = load_for_compare(run_dirs)
    if not ts:
        raise UserError("no transcripts in " + ", ".join(str(r.path) for r in run_dirs) + "; generate first")
    rng = random.Random(seed)
    rng.shuffle(ts)
    if limit is not None:
        ts = ts[:limit]
    rubrics, root = _rubrics()
    salt = secrets.token_hex(8)
    key_items: dict[str, dict[str, Any]] = {}
    sheet_rows: list[dict[str, Any]] = []
    dialogues = []
    for n, t in enumerate(ts, 1):
        did = f"D{n:03d}"
        items = []
        for level in levels:
            criteria_for(level)
            targets = [a for a in t.agents if t.turns_of(a)] if level == "agent" else [None]
            for agent in targets:
                item_id = "I" + stable_hash([salt, t.dialogue_id, level, agent], 10)
                key_items[item_id] = {
                    "dialogue": did,
                    "dialogue_id": t.dialogue_id,
                    "system": t.system,
                    "pair_key": t.pair_key,
                    "task": t.task,
                    "split": t.split,
                    "domain": t.domain,
                    "context_id": t.context_id,
                    "level": level,
                    "agent": agent,
                }
                crit = criteria_for(level)
                sheet_rows.append({"annotator": "", "item_id": item_id, "dialogue": did, "level": level, "agent": agent or ""})
                r = rubrics[level].for_template()
                items.append({"item_id": item_id, "level": level, "agent": agent, "criteria": r["criteria"], "keys": list(crit)})
        dialogues.append(
            {
                "id": did,
                "situation": prompts.situation_text(t.context),
                "turns": [{"speaker": x.speaker, "text": x.text} for x in t.turns],
                "items": items,
            }
        )
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out: {out} is a file; give a folder for sheet.csv, form.html, rubric.md and key.json")
    # everything is rendered before the first file is written: a broken form template writes nothing
    form = _form_html(root, title or f"{len(dialogues)} conversations", dialogues, rubrics, salt)
    sheet = _csv_text(sheet_rows)
    rubric_md = _rubric_md(rubrics)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "sheet.csv", sheet)
    atomic_write_json(
        out / "key.json",
        {
            "schema": KEY_SCHEMA,
            "salt": salt,
            "seed": seed,
            "runs": [str(r.path) for r in run_dirs],
            "items": key_items,
        },
    )
    atomic_write_text(out / "rubric.md", rubric_md)
    atomic_write_text(out / "form.html", form)
    return ExportResult(out, len(dialogues), len(key_items))


def _csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: r.get(c, "") for c in COLUMNS})
    return buf.getvalue()


def _rubric_md(rubrics) -> str:
    lines = ["# Rubric (1 = worst, 5 = best)", ""]
    for level, rub in rubrics.items():
        lines += [f"## {level.capitalize()} level", ""]
        for key, c in rub.criteria.items():
            lines += [f"### {c.title} (`{key}`)", c.question, ""]
            lines += [f"- {n}: {text}" for n, text in sorted(c.anchors.items())] + [""]
    return "\n".join(lines)


def _form_html(root: Path, title: str, dialogues, rubrics, salt: str) -> str:
    from markupsafe import Markup

    from .templates import environment, template_path

    template_path(root, FORM_TEMPLATE)  # one line when it is missing or leaves the judge template folders

    def js(obj: Any) -> Markup:
        return Markup(json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))

    items = [
        {"item_id": it["item_id"], "dialogue": d["id"], "level": it["level"], "agent": it["agent"], "criteria": it["keys"]}
        for d in dialogues
        for it in d["items"]
    ]
    from .. import templating

    env = environment(root, autoescape=True, trim_blocks=False, lstrip_blocks=False)  # HTML: whitespace kept as written
    return templating.render(
        env,
        FORM_TEMPLATE,
        {
            "title": title,
            "dialogues": dialogues,
            "rubrics": [r.for_template() for r in rubrics.values()],
            "items_json": js(items),
            "columns_json": js(COLUMNS),
            "store_key_json": js(salt),
        },
        limit=None,
    )


FORM_TEMPLATE = "human_form.html.j2"


# ------------------------------------------------------------------------------------- import

KEY_ITEM_FIELDS = ("dialogue_id", "pair_key", "system", "task", "split", "domain", "context_id", "level", "agent")


def _find_key(sheet: Path, key: str | Path | None) -> dict[str, Any]:
    path = Path(key) if key else sheet.parent / "key.json"
    if not path.is_file():
        raise UserError(f"{path}: unblinding key not found; pass --key pointing to the key.json written by `human export`")
    data = read_json_object(path, what="the key.json written by `human export`", limit=MAX_SHEET_BYTES)
    if data.get("schema") != KEY_SCHEMA:
        raise UserError(f"{path}: schema is {data.get('schema')!r}, expected {KEY_SCHEMA!r}")
    items = data.get("items")
    if not isinstance(items, dict) or not items:
        raise UserError(f"{path}: field 'items' must map item ids to items; use the key.json written by `human export`")
    for item_id, it in items.items():
        missing = [f for f in KEY_ITEM_FIELDS if not isinstance(it, dict) or f not in it]
        if missing:
            raise UserError(f"{path}: item '{item_id}' lacks {', '.join(missing)}; use the key.json written by `human export`")
        if it["level"] not in ("agent", "group"):
            raise UserError(f"{path}: item '{item_id}' has level {it['level']!r}; expected agent or group")
    return data


def _read_sheet(path: Path, items: dict[str, Any]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and rows of a filled sheet; every column the key's items need must be there."""
    text = read_text(
        path, what="a filled rating sheet (CSV with the header of sheet.csv)", limit=MAX_SHEET_BYTES, allow_empty=False
    )
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise UserError(f"{path}: not a readable CSV file ({exc}); save the sheet as CSV") from None
    header = [h.strip() for h in rows[0]] if rows else []
    dup = sorted({h for h in header if h and header.count(h) > 1})
    if dup:
        raise UserError(f"{path}:1: column(s) {', '.join(dup)} appear twice; keep the header of sheet.csv")
    unknown = [h for h in header if h and h not in COLUMNS]
    if unknown:
        raise UserError(f"{path}:1: unknown column(s) {', '.join(unknown)}; keep the header of sheet.csv ({','.join(COLUMNS)})")
    levels = {it["level"] for it in items.values()}
    needed = ["annotator", "item_id", *[c for c in ALL_CRITERIA if any(c in criteria_for(lv) for lv in levels)]]
    missing = [c for c in needed if c not in header]
    if missing:
        raise UserError(f"{path}:1: missing column(s) {', '.join(missing)}; keep the header of sheet.csv ({','.join(COLUMNS)})")
    out: list[tuple[int, dict[str, str]]] = []
    for line, cells in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) > len(header) and any(c.strip() for c in cells[len(header) :]):
            raise UserError(f"{path}:{line}: {len(cells)} cells but the header has {len(header)} columns; remove the extra cells")
        rec = {h: (cells[i] if i < len(cells) else "") for i, h in enumerate(header) if h}
        out.append((line, rec))
    return header, out


def import_ratings(files: list[str | Path], *, key: str | Path | None = None) -> list[dict[str, Any]]:
    """Filled sheets -> judgment rows (``judge = human:<annotator>``). Empty cells are not rated.

    Every file is read and checked before anything is returned: encoding (UTF-8, a BOM is fine),
    size, the header (every criterion column the key's items need), every cell."""
    rows: list[dict[str, Any]] = []
    seen: dict[tuple, str] = {}
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise UserError(f"{path}: file not found" if not path.exists() else f"{path}: not a file; pass a filled sheet CSV")
        k = _find_key(path, key)
        items = k["items"]
        _, records = _read_sheet(path, items)
        for line, rec in records:
            where = f"{path}:{line}"
            item_id = (rec.get("item_id") or "").strip()
            if item_id not in items:
                raise UserError(
                    f"{where}: item_id '{item_id[:40]}' is not in the key; was the sheet exported with this key.json?"
                )
            it = items[item_id]
            level = it["level"]
            allowed = criteria_for(level)
            values = {c: (rec.get(c) or "").strip() for c in ALL_CRITERIA}
            wrong = [c for c in ALL_CRITERIA if values[c] and c not in allowed]
            if wrong:
                raise UserError(f"{where}: {', '.join(wrong)} do not apply to {level}-level items; leave them empty")
            if not any(values[c] for c in allowed):
                continue
            annotator = (rec.get("annotator") or "").strip()
            if not annotator:
                raise UserError(f"{where}: column 'annotator' is empty; fill in the rater's name")
            for c in allowed:
                v = values[c]
                if not v:
                    continue
                if v not in ("1", "2", "3", "4", "5"):
                    raise UserError(f"{where}: {c} = {v[:20]!r}; ratings are whole numbers 1-5 or empty")
                ukey = (annotator, item_id, c)
                if ukey in seen:
                    raise UserError(f"{where}: {annotator} rated {item_id} {c} twice (also at {seen[ukey]})")
                seen[ukey] = where
                s = float(v)
                rows.append(
                    {
                        "schema": "mascot-judgment/1",
                        "dialogue_id": it["dialogue_id"],
                        "pair_key": it["pair_key"],
                        "system": it["system"],
                        "task": it["task"],
                        "split": it["split"],
                        "domain": it["domain"],
                        "context_id": it["context_id"],
                        "judge": f"human:{annotator}",
                        "judge_model": "human",
                        "level": level,
                        "agent": it["agent"],
                        "criterion": c,
                        "score": s,
                        "score_100": to_100(s),
                        "weighted_score": None,
                        "status": "scored",
                        "reason": None,
                        "rationale": None,
                        "usage": {},
                        "spec_hash": None,
                        "template_hash": None,
                        "source": str(path),
                    }
                )
    if not rows:
        raise UserError(f"{', '.join(str(f) for f in files)}: no ratings found; fill in 1-5 in the criteria columns")
    return rows


def save_ratings(rows: list[dict[str, Any]], out: str | Path) -> Path:
    out = Path(out)
    atomic_write_jsonl(out, rows)
    return out


def load_human(path: str | Path, *, key: str | Path | None = None) -> list[dict[str, Any]]:
    """Human ratings from a ``human import`` JSONL file or directly from filled CSV sheets."""
    p = Path(path)
    if p.suffix == ".csv":
        return import_ratings([p], key=key)
    if not p.is_file():
        raise UserError(f"{p}: file not found; pass the JSONL written by `mascot-eval human import` or a filled sheet CSV")
    rows = list(read_jsonl(p, what="a human-ratings file from `mascot-eval human import`"))
    if not rows or any(not str(r.get("judge", "")).startswith("human:") for r in rows):
        raise UserError(
            f"{p}: not a human-ratings file (rows must have judge 'human:<name>'); create it with `mascot-eval human import`"
        )
    for i, r in enumerate(rows, 1):
        missing = [k for k in ("dialogue_id", "level", "criterion", "score_100", "pair_key") if k not in r]
        if missing or r.get("level") not in ("agent", "group") or not isinstance(r.get("score_100"), (int, float)):
            raise UserError(
                f"{p}:{i}: not a human rating row ({'missing ' + ', '.join(missing) if missing else 'bad level or score'}); "
                "create the file with `mascot-eval human import`"
            )
    return rows


def annotators(rows: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for r in rows:
        out[r["judge"].removeprefix("human:")] += 1
    return dict(out)
