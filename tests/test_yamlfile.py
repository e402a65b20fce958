"""Strict YAML (mascot_eval.yamlfile) and the one-line readers of mascot_eval.fileio."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from mascot_eval.errors import UserError
from mascot_eval.fileio import confined_path, read_json_object, read_jsonl, read_text
from mascot_eval.yamlfile import load_model, load_yaml, parse_yaml_text


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    temperature: float = 0.7
    max_tokens: int = Field(default=96, ge=1)


class Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    rounds: int = 3
    enabled: bool = False
    decoding: Inner = Field(default_factory=Inner)
    items: list[str] = Field(default_factory=list)


def _file(tmp_path: Path, text: str | bytes, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: a\nrounds: 2\nrounds: 3\n", r"c\.yaml:3: field 'rounds': duplicate key \(first on line 2\)"),
        ("name: a\ndecoding:\n  max_tokens: 5\n  max_tokens: 6\n", r"c\.yaml:4: field 'decoding\.max_tokens': duplicate key"),
        ("name: a\nitems:\n  - {x: 1, x: 2}\n", r"c\.yaml:3: field 'items\.0\.x': duplicate key"),
        ("name: a\nrounds: true\n", r"c\.yaml:2: field 'rounds': Input should be a valid integer, got a boolean \(True\)"),
        ("name: a\nrounds: '3'\n", r"c\.yaml:2: field 'rounds': .*got a string"),
        ("name: a\nrounds: 2.5\n", r"c\.yaml:2: field 'rounds'"),
        ("name: a\nenabled: 1\n", r"c\.yaml:2: field 'enabled'.*got a whole number"),
        ("name: a\nenabled: 'yes'\n", r"c\.yaml:2: field 'enabled'"),
        ("name: a\ndecoding: {temperature: true}\n", r"c\.yaml:2: field 'decoding\.temperature'.*boolean"),
        ("name: a\ndecoding:\n  max_tokens: '96'\n", r"c\.yaml:3: field 'decoding\.max_tokens'"),
        ("name: 5\n", r"c\.yaml:1: field 'name'.*got a whole number"),
        ("name: a\nitems: [x, 3]\n", r"c\.yaml:2: field 'items\.1'"),
        ("name: a\nroundz: 2\n", r"c\.yaml:2: field 'roundz': unknown field"),
        ("rounds: 2\n", r"c\.yaml: field 'name': required field is missing"),
        ("- name: a\n", r"c\.yaml: expected a mapping of fields at the top level, got a list"),
        ("", r"c\.yaml: expected a mapping of fields at the top level, got null"),
        ("name: [a\n", r"c\.yaml:2: malformed YAML"),
        ("a: &a [*a]\nname: x\n", r"c\.yaml: an alias refers to itself"),
    ],
)
def test_strict_yaml_errors_name_file_line_and_field(tmp_path, text, message):
    with pytest.raises(UserError, match=message) as exc:
        load_model(_file(tmp_path, text), Cfg)
    assert "\n" not in str(exc.value)


def test_what_stays_allowed(tmp_path):
    text = "base: &b {temperature: 0, max_tokens: 5}\nname: a\ndecoding:\n  <<: *b\n  max_tokens: 7\n"
    data = load_yaml(_file(tmp_path, text))
    assert data["decoding"] == {"temperature": 0, "max_tokens": 7}  # a merge key's values may be overridden
    cfg = load_model(_file(tmp_path, "name: a\ndecoding: {temperature: 0, max_tokens: 5}\n"), Cfg)
    assert cfg.decoding.temperature == 0.0  # an integer where a float is expected is fine
    assert parse_yaml_text("lr: 1e-5\nb: 2.5E+3\nc: '1e-5'\nd: 1_000\n", "x").data == {
        "lr": 1e-5,
        "b": 2500.0,
        "c": "1e-5",
        "d": 1000,
    }
    bom = load_model(_file(tmp_path, b"\xef\xbb\xbfname: a\n"), Cfg)
    assert bom.name == "a"


def test_alias_expansion_and_size_are_bounded(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    with pytest.raises(UserError, match="expands to more than 1,000,000 values"):
        load_yaml(_file(tmp_path, "\n".join(lines) + "\n"))
    with open(tmp_path / "big.yaml", "wb") as fh:
        fh.truncate(30 * 1024 * 1024)
    with pytest.raises(UserError, match=r"big\.yaml: 31,457,280 bytes is over the 262,144-byte limit"):
        load_yaml(tmp_path / "big.yaml")
    with pytest.raises(UserError, match=r"c\.yaml:2: not UTF-8 text"):
        load_yaml(_file(tmp_path, "name: a\nnote: caf\xe9\n".encode("latin-1")))


def test_confined_path(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("x")
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    kw = {"field": "source.path", "where": "t.yaml"}
    assert confined_path(root, "sub/f.txt", **kw) == root / "sub" / "f.txt"
    assert confined_path(root, "sub/../sub/f.txt", **kw) == root / "sub" / "../sub/f.txt"
    for bad, msg in (
        ("/etc/passwd", "absolute path"),
        ("../secret.txt", "leaves"),
        ("sub/../../secret.txt", "leaves"),
        ("~/x", "absolute path"),
        ("link.txt", "link that leads outside"),
    ):
        with pytest.raises(UserError, match=msg) as exc:
            confined_path(root, bad, **kw)
        assert str(exc.value).startswith("t.yaml: field 'source.path'") and str(root) in str(exc.value)
        assert "TOPSECRET" not in str(exc.value)
    assert confined_path(root, "link.txt", follow_links=False, **kw) == root / "link.txt"  # data dirs may use links
    other = tmp_path / "other"
    other.mkdir()
    (other / "g.txt").write_text("y")
    assert confined_path([root, other], "g.txt", **kw) == other / "g.txt"  # first root holding it


def test_readers(tmp_path, capsys):
    with pytest.raises(UserError, match="is a folder"):
        read_text(tmp_path)
    with pytest.raises(UserError, match="file not found"):
        read_text(tmp_path / "nope")
    with pytest.raises(UserError, match="empty file"):
        read_json_object(_file(tmp_path, "", "m.json"))
    with pytest.raises(UserError, match="top level is a JSON array, expected an object"):
        read_json_object(_file(tmp_path, "[1]", "m.json"))
    with pytest.raises(UserError, match=r"m\.json:2: not valid JSON"):
        read_json_object(_file(tmp_path, '{\n"a": }', "m.json"))
    assert read_json_object(_file(tmp_path, b'\xef\xbb\xbf{"a": 1}', "m.json")) == {"a": 1}
    p = _file(tmp_path, b'\xef\xbb\xbf{"a": 1}\n{"a": 2}\n{"a": 3, "b', "r.jsonl")
    assert [r["a"] for r in read_jsonl(p)] == [1, 2]
    assert [r["a"] for r in read_jsonl(p)] == [1, 2]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: {p}:3: last line is cut off (an interrupted write); 1 line ignored"]  # once per file state
    with pytest.raises(UserError, match=r"r\.jsonl:2: a JSON array, expected one object per line"):
        list(read_jsonl(_file(tmp_path, '{"a": 1}\n[1]\n', "r.jsonl")))
    with pytest.raises(UserError, match=r"r\.jsonl:1: not UTF-8 text"):
        list(read_jsonl(_file(tmp_path, '{"a": "caf\xe9"}\n'.encode("latin-1"), "r.jsonl")))
