"""Names the documentation (README and docs/) gives for files the commands write are the names the commands use."""

from __future__ import annotations

from pathlib import Path

from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
JUDGES_PAGE = (ROOT / "docs" / "judges.md").read_text(encoding="utf-8")  # human evaluation lives there
ALL_DOCS = README + "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").rglob("*.md")))


def test_human_ratings_file_name_agrees_in_docs_help_and_code(tmp_path, capsys):
    from mascot_eval.cli.human import RATINGS_FILE

    assert RATINGS_FILE == "human_ratings.jsonl"
    assert f"--human human/{RATINGS_FILE}" in JUDGES_PAGE and "human/ratings.jsonl" not in ALL_DOCS
    code, out, _ = run_cli(["human", "import", "--help"], capsys)
    assert code == 0 and RATINGS_FILE in out
