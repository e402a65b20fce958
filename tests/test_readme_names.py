"""Names the README gives for files the commands write are the names the commands use."""

from __future__ import annotations

from pathlib import Path

from tests.cli_helpers import run_cli

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_human_ratings_file_name_agrees_in_readme_help_and_code(tmp_path, capsys):
    from mascot_eval.cli.human import RATINGS_FILE

    assert RATINGS_FILE == "human_ratings.jsonl"
    assert f"--human human/{RATINGS_FILE}" in README and "human/ratings.jsonl" not in README
    code, out, _ = run_cli(["human", "import", "--help"], capsys)
    assert code == 0 and RATINGS_FILE in out
