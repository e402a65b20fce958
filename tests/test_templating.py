"""The shared template sandbox (mascot_eval.templating): payloads, confinement, limits, one-line errors."""

from __future__ import annotations

import pytest

from mascot_eval.errors import UserError
from mascot_eval.templating import check_name, environment, render, resolve
from tests.test_bad_input import PAYLOADS


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "templates"
    d.mkdir()
    (tmp_path / "outside.txt").write_text("TOPSECRET\n")
    return d


@pytest.mark.parametrize("name", sorted(PAYLOADS))
@pytest.mark.parametrize("autoescape", [False, True])
def test_payloads_are_blocked_and_name_the_template(folder, tmp_path, name, autoescape):
    marker = tmp_path / "MARKER"
    (folder / "evil.j2").write_text("line one\n" + PAYLOADS[name].replace("MARKER", str(marker)))
    env = environment([folder], autoescape=autoescape)
    with pytest.raises(UserError) as exc:
        render(env, "evil.j2", {"x": 1})
    msg = str(exc.value)
    assert f"{folder / 'evil.j2'}:2: unsafe template operation blocked by the sandbox" in msg and "\n" not in msg
    assert not marker.exists()


def test_an_included_partial_names_itself_with_its_line(folder):
    (folder / "outer.j2").write_text("{% include '_inner.j2' %}")
    (folder / "_inner.j2").write_text("ok\n\n{{ lipsum.__globals__ }}")
    with pytest.raises(UserError, match=r"_inner\.j2:3: unsafe template operation"):
        render(environment([folder]), "outer.j2", {})


@pytest.mark.parametrize(
    "name, message",
    [
        ("../outside.txt", "'..' is not allowed"),
        ("a/../../outside.txt", "'..' is not allowed"),
        ("/etc/passwd", "absolute paths are not allowed"),
        ("~/x.j2", "absolute paths are not allowed"),
        ("C:/x.j2", "absolute paths are not allowed"),
        ("a\\b.j2", "backslash"),
        ("", "give a file name"),
    ],
)
def test_names_stay_inside_the_folder(folder, name, message):
    with pytest.raises(UserError, match=message):
        check_name(name)
    (folder / "inc.j2").write_text("{% include " + repr(name) + " %}")
    with pytest.raises(UserError, match=message) as exc:
        render(environment([folder]), "inc.j2", {})
    assert "TOPSECRET" not in str(exc.value) and str(folder / "inc.j2") in str(exc.value)


def test_a_symlink_out_of_the_folder_is_refused_without_reading_it(folder, tmp_path):
    (folder / "link.j2").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(UserError, match="link that leads outside") as exc:
        render(environment([folder]), "link.j2", {})
    assert "TOPSECRET" not in str(exc.value)
    (folder / "sub").mkdir()
    (folder / "sub" / "real.j2").write_text("inside {{ x }}")
    (folder / "ok.j2").symlink_to(folder / "sub" / "real.j2")  # a link that stays inside is fine
    assert render(environment([folder]), "ok.j2", {"x": 1}) == "inside 1"
    assert resolve([folder], "missing.j2") is None


@pytest.mark.parametrize(
    "source, message",
    [
        ("{{ 'x' * 100000000 }}", "'\\*' would build a sequence"),
        ("{{ [1, 2] * 10000000 }}", "'\\*' would build a sequence"),
        ("{{ 2 ** 100000 }}", "'\\*\\*' with exponent"),
        ("{{ ((2 ** 128) ** 128) ** 128 }}", "'\\*\\*' with exponent"),
        ("{% for i in range(10 ** 7) %}{% endfor %}", "Range too big"),
        ("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "RecursionError"),
        ("{{ 1 / 0 }}", "ZeroDivisionError"),
        ("{{ 'a' + 1 }}", "TypeError"),
        ("{{ missing }}", "'missing' is undefined; variables available: x"),
        ("{{ x.missing.deeper }}", "has no attribute 'missing'"),
        ("{% if %}", "template syntax error"),
    ],
)
def test_failures_are_one_line_naming_the_file(folder, source, message):
    (folder / "t.j2").write_text(source)
    with pytest.raises(UserError, match=message) as exc:
        render(environment([folder]), "t.j2", {"x": 1})
    assert str(folder / "t.j2") in str(exc.value) and "\n" not in str(exc.value)


def test_output_limit_and_ordinary_templates(folder):
    (folder / "long.j2").write_text("{% for i in range(50000) %}{{ 'abcdefghij' * 10 }}{% endfor %}")
    with pytest.raises(UserError, match="renders more than 1,000 characters"):
        render(environment([folder]), "long.j2", {}, limit=1000)
    assert len(render(environment([folder]), "long.j2", {}, limit=None)) == 5_000_000
    (folder / "ok.j2").write_bytes("\ufeff{{ greeting }}, {{ names | join(', ') }}! {{ '%.1f' % 2.25 }} {{ 3 ** 2 }}".encode())
    assert render(environment([folder]), "ok.j2", {"greeting": "Hi", "names": ["A", "B"]}) == "Hi, A, B! 2.2 9"
    (folder / "esc.j2").write_text("{{ t }}")
    assert render(environment([folder], autoescape=True), "esc.j2", {"t": "<b>"}) == "&lt;b&gt;"


def test_a_template_over_the_size_limit_is_refused_before_reading(folder):
    with open(folder / "big.j2", "wb") as fh:
        fh.truncate(300 * 1024)
    with pytest.raises(UserError, match="over the 262,144-byte limit"):
        render(environment([folder]), "big.j2", {})
