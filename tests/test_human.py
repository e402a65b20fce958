"""Human evaluation: blinded export, validated import, agreement with judges."""

from __future__ import annotations

import csv
import json

import pytest

from mascot_eval.errors import UserError
from mascot_eval.judges.human import COLUMNS, export, import_ratings, load_human
from mascot_eval.runs.rundir import RunDir
from tests.judge_helpers import transcript


def _run(tmp_path):
    rd = RunDir(tmp_path / "run", create=True)
    for s in ("mascot", "zeroshot"):
        for c in ("c1", "c2"):
            rd.append_transcript(transcript(system=s, context_id=c, agent_text=f"<b>{c}-{len(s)}</b> </script> reply"))
    return rd


def _fill(sheet, out, annotator, score_fn):
    with open(sheet, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for i, r in enumerate(rows):
        r["annotator"] = annotator
        crit = (
            ["emotion", "empathy", "consistency", "relevance", "contribution"]
            if r["level"] == "agent"
            else ["fidelity", "originality", "relevance", "engagement"]
        )
        for c in crit:
            r[c] = str(score_fn(i, c))
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return rows


def test_export_is_blinded_and_complete(tmp_path):
    rd = _run(tmp_path)
    res = export([rd], tmp_path / "h", seed=1)
    assert res.dialogues == 4 and res.items == 4 * (3 + 1)
    sheet = (tmp_path / "h" / "sheet.csv").read_text()
    html = (tmp_path / "h" / "form.html").read_text()
    for secret in ("mascot", "zeroshot", "demo:c1"):
        assert secret not in sheet and secret not in html  # systems and dialogue ids are hidden
    assert "</script> reply" not in html and "&lt;b&gt;" in html  # dialogue text is escaped
    assert "Persona Consistency" in html and "Download CSV" in html and "http" not in html.split("<script>")[1]
    key = json.loads((tmp_path / "h" / "key.json").read_text())
    assert {v["system"] for v in key["items"].values()} == {"mascot", "zeroshot"}
    assert "Persona Consistency" in (tmp_path / "h" / "rubric.md").read_text()


def test_import_roundtrip_and_agreement(tmp_path):
    from mascot_eval.judges.agreement import human_agreement

    rd = _run(tmp_path)
    export([rd], tmp_path / "h")
    sheet = tmp_path / "h" / "sheet.csv"
    _fill(sheet, tmp_path / "h" / "a1.csv", "ann1", lambda i, c: 1 + i % 5)
    _fill(sheet, tmp_path / "h" / "a2.csv", "ann2", lambda i, c: 1 + (i + (i % 3 == 0)) % 5)
    rows = import_ratings([tmp_path / "h" / "a1.csv", tmp_path / "h" / "a2.csv"])
    assert len(rows) == 2 * (4 * 3 * 5 + 4 * 4)
    assert {r["judge"] for r in rows} == {"human:ann1", "human:ann2"}
    assert {r["system"] for r in rows} == {"mascot", "zeroshot"}  # unblinded through the key
    t = human_agreement([], rows, n_boot=50)
    assert (t.statistic == "alpha_interval").any()
    # the CSV can be read directly too
    assert len(load_human(tmp_path / "h" / "a1.csv")) == len(rows) // 2


@pytest.mark.parametrize(
    "edit,msg",
    [
        (lambda r: r.update(emotion="6") if r["level"] == "agent" else None, "whole numbers 1-5"),
        (lambda r: r.update(annotator=""), "annotator' is empty"),
        (lambda r: r.update(item_id="Ibogus"), "not in the key"),
        (lambda r: r.update(emotion="3") if r["level"] == "group" else None, "do not apply to group-level"),
    ],
)
def test_import_validation(tmp_path, edit, msg):
    rd = _run(tmp_path)
    export([rd], tmp_path / "h")
    rows = _fill(tmp_path / "h" / "sheet.csv", tmp_path / "h" / "f.csv", "ann", lambda i, c: 3)
    for r in rows:
        edit(r)
    with open(tmp_path / "h" / "f.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(UserError, match=msg):
        import_ratings([tmp_path / "h" / "f.csv"])
