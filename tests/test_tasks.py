"""Shipped task files and persona cards, and every bad-input case of a task file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from mascot_eval.data.check import check_task, split_counts
from mascot_eval.errors import UserError
from mascot_eval.personas import get_group, load_personas
from mascot_eval.taskspec import MBTI_TYPES, load_task, load_task_file, resolve_tasks, task_files

REQUIRED = {"demo", "ed-positive", "ed-negative", "ed-neutral", "qmsum-academic", "qmsum-committee", "qmsum-product", "esconv"}


def test_every_required_task_ships_and_loads():
    files = task_files()
    assert REQUIRED <= set(files)
    for name in REQUIRED:
        t = load_task(name)
        assert t.name == name and t.content_hash
        assert (1 <= t.rounds <= 2) if name == "demo" else (3 <= t.rounds <= 4)
        assert t.user.profiles == list(MBTI_TYPES)
        assert t.sample.seed == 13


def test_task_fields_follow_the_paper_splits():
    for v in ("positive", "negative", "neutral"):
        t = load_task(f"ed-{v}")
        assert (t.split, t.domain, t.source.loader, t.source.filters, t.personas) == (
            "in_domain",
            "emotional",
            "empathetic_dialogues",
            {"valence": v},
            "emotional",
        )
        assert t.sample.size == 100
    for d in ("academic", "committee", "product"):
        t = load_task(f"qmsum-{d}")
        assert (t.split, t.domain, t.source.loader, t.personas) == ("ood", "workplace", "qmsum", "workplace")
        assert t.source.filters == {"domain": d.capitalize()}
    t = load_task("esconv")
    assert (t.split, t.source.loader) == ("ood", "esconv")
    assert load_task("demo").source.loader == "demo"


def test_suites():
    assert {t.name for t in resolve_tasks(["in-domain"])} == {"ed-positive", "ed-negative", "ed-neutral"}
    assert {t.name for t in resolve_tasks(["ood"])} == {"qmsum-academic", "qmsum-committee", "qmsum-product", "esconv"}
    assert len(resolve_tasks(["all", "ed-positive"])) == 7


def test_every_shipped_task_validates_on_the_real_data(data_dir):
    checks = [check_task(load_task(n), data_dir) for n in sorted(REQUIRED)]
    by = {c.task.name: c for c in checks}
    assert {n: by[n].available for n in by} == {
        "demo": 28,
        "ed-negative": 1230,
        "ed-neutral": 295,
        "ed-positive": 1022,
        "esconv": 195,
        "qmsum-academic": 58,
        "qmsum-committee": 72,
        "qmsum-product": 151,
    }
    assert by["ed-positive"].source_stats["conversations"] == 2547 and by["ed-positive"].source_stats["emotions"] == 32
    assert by["qmsum-product"].source_stats["meetings"] == 35 and by["qmsum-product"].source_stats["queries"] == 281
    assert by["esconv"].source_stats["dialogues"] == 195
    assert split_counts(checks) == {
        "in_domain": {"tasks": 4, "contexts": 308, "dialogues": 308},
        "ood": {"tasks": 4, "contexts": 330, "dialogues": 330},
    }


# ---- persona cards --------------------------------------------------------------------------------------


def test_persona_cards_and_groups():
    cards, groups = load_personas()
    assert {"anchor", "catalyst", "beacon", "action_guide"} <= set(cards)
    assert groups["emotional"].members == ["anchor", "catalyst", "beacon"]
    assert "action_guide" in groups["workplace"].members
    roles = {c.id: c.role for c in cards.values()}
    assert roles["anchor"] == "emotional validator" and roles["catalyst"] == "critical thinker"
    assert roles["beacon"] == "growth advocate" and roles["action_guide"] == "practical advisor"
    for card in cards.values():
        assert len(card.examples) == 2 and card.never and card.traits and card.speaking_style
        assert card.name in card.prompt_block()
    names = [c.name for c in get_group("workplace")[1]]
    assert len(names) == len(set(names))


def test_persona_card_with_three_examples_is_rejected(tmp_path):
    root = tmp_path / "personas"
    root.mkdir()
    card = load_personas()[0]["anchor"].model_dump()
    card["examples"].append("a third line")
    (root / "anchor.yaml").write_text(yaml.safe_dump(card))
    with pytest.raises(UserError, match=r"anchor\.yaml:\d+: field 'examples'"):
        load_personas(root)
    del card["examples"]
    (root / "anchor.yaml").write_text(yaml.safe_dump(card))
    with pytest.raises(UserError, match=r"anchor\.yaml: field 'examples': required field is missing"):
        load_personas(root)


# ---- bad task files: one line naming file and line/field ----------------------------------------------------

GOOD = """\
name: {name}
split: in_domain
domain: emotional
source:
  loader: empathetic_dialogues
  path: empathetic_dialogues/test.csv
  filters: {valence: positive}
sample: {size: 5, seed: 1}
personas: emotional
rounds: 3
"""


def write_task(tmp_path: Path, text: str, name: str = "mytask") -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(text.replace("{name}", name))
    return p


def one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


def test_good_custom_task_validates(tmp_path, data_dir):
    c = check_task(load_task_file(write_task(tmp_path, GOOD)), data_dir)
    assert c.sampled == 5 and c.available == 1022


def test_malformed_yaml_names_the_line(tmp_path):
    p = write_task(tmp_path, GOOD.replace("rounds: 3", "rounds: [3"))
    with pytest.raises(UserError) as exc:
        load_task_file(p)
    assert one_line(exc).startswith(f"{p}:") and "malformed YAML" in str(exc.value)


def test_unknown_field_is_named(tmp_path):
    p = write_task(tmp_path, GOOD + "temperature: 0.7\n")
    with pytest.raises(UserError, match=r"field 'temperature': unknown field") as exc:
        load_task_file(p)
    assert str(p) in one_line(exc)
    p = write_task(tmp_path, GOOD.replace("  path:", "  pth:"))
    with pytest.raises(UserError, match=r"field 'source.pth': unknown field"):
        load_task_file(p)


def test_name_must_match_the_file(tmp_path):
    p = write_task(tmp_path, GOOD.replace("name: {name}", "name: other"))
    with pytest.raises(UserError, match="field 'name' is 'other' but the file is named 'mytask'"):
        load_task_file(p)


def test_missing_persona_group(tmp_path, data_dir):
    p = write_task(tmp_path, GOOD.replace("personas: emotional", "personas: emotionl"))
    with pytest.raises(
        UserError, match=r"field 'personas': unknown persona group 'emotionl' \(did you mean 'emotional'\?\)"
    ) as exc:
        check_task(load_task_file(p), data_dir)
    assert str(p) in one_line(exc)


def test_group_naming_a_missing_card(tmp_path):
    root = tmp_path / "personas"
    shutil.copytree(Path(__file__).resolve().parent.parent / "tasks" / "personas", root)
    (root / "beacon.yaml").unlink()
    with pytest.raises(UserError, match=r"groups\.yaml:\d+: group 'emotional' names persona 'beacon'") as exc:
        get_group("emotional", root)
    one_line(exc)


def test_unknown_loader(tmp_path, data_dir):
    p = write_task(tmp_path, GOOD.replace("loader: empathetic_dialogues", "loader: empathetic_dialogs"))
    with pytest.raises(
        UserError, match=r"field 'source.loader': unknown loader 'empathetic_dialogs' \(did you mean 'empathetic_dialogues'\?\)"
    ) as exc:
        check_task(load_task_file(p), data_dir)
    assert str(p) in one_line(exc)


def test_missing_data_file(tmp_path, data_dir):
    p = write_task(tmp_path, GOOD.replace("test.csv", "tset.csv"))
    with pytest.raises(UserError, match=r"empathetic_dialogues/tset\.csv: data file not found; MASCOT_DATA_DIR") as exc:
        check_task(load_task_file(p), data_dir)
    one_line(exc)


def test_truncated_data_file(tmp_path, data_dir):
    d = tmp_path / "data" / "empathetic_dialogues"
    d.mkdir(parents=True)
    (d / "test.csv").write_bytes((data_dir / "empathetic_dialogues" / "test.csv").read_bytes()[:123_457])
    p = write_task(tmp_path, GOOD)
    with pytest.raises(UserError, match=r"test\.csv:\d+: .*truncated") as exc:
        check_task(load_task_file(p), tmp_path / "data")
    one_line(exc)


def test_wrong_csv_header(tmp_path, data_dir):
    d = tmp_path / "data" / "empathetic_dialogues"
    d.mkdir(parents=True)
    raw = (data_dir / "empathetic_dialogues" / "test.csv").read_bytes()
    (d / "test.csv").write_bytes(raw.replace(b"selfeval,tags", b"self_eval,tags", 1))
    p = write_task(tmp_path, GOOD)
    with pytest.raises(UserError, match=r"test\.csv:1: header is .*expected 'conv_id,utterance_idx") as exc:
        check_task(load_task_file(p), tmp_path / "data")
    one_line(exc)


def test_bad_profile_and_rounds(tmp_path):
    p = write_task(tmp_path, GOOD + "user: {profiles: [INTX]}\n")
    with pytest.raises(UserError, match=r"field 'user.profiles'.*unknown profile 'INTX'"):
        load_task_file(p)
    p = write_task(tmp_path, GOOD.replace("rounds: 3", "rounds: 0"))
    with pytest.raises(UserError, match=r"field 'rounds'"):
        load_task_file(p)


def test_unknown_task_name_suggests():
    with pytest.raises(UserError, match=r"unknown task 'ed-postive' \(did you mean 'ed-positive'\?\)"):
        load_task("ed-postive")


def test_unknown_judge_and_metric(tmp_path, data_dir):
    p = write_task(tmp_path, GOOD + "judging: {judges: [lokal]}\n")
    with pytest.raises(UserError, match=r"field 'judging.judges': unknown judge 'lokal' \(did you mean 'local'\?\)") as exc:
        check_task(load_task_file(p), data_dir)
    assert str(p) in one_line(exc)
    p = write_task(tmp_path, GOOD + "metrics: [distinct_2, distinkt_1]\n")
    with pytest.raises(UserError, match=r"field 'metrics': unknown metric 'distinkt_1' \(did you mean 'distinct_1'\?\)"):
        check_task(load_task_file(p), data_dir)
    p = write_task(tmp_path, GOOD + "metrics: [distinct_2, inter_agent_selfbleu]\n")
    assert check_task(load_task_file(p), data_dir).sampled == 5
