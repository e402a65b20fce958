"""`mascot-eval models list` and `mascot-eval cache stats|clear`."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from mascot_eval.backends.client import ClientSettings, ModelClient
from tests import fakes
from tests.cli_helpers import run_cli


def test_models_list_shows_backends_aliases_and_usability(monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-shown-123456")
    code, out, err = run_cli(["models", "list"], capsys)
    assert code == 0, err
    for kind in ("openai", "anthropic", "openai-compatible", "embedded", "hf", "vllm"):
        assert f"\n{kind} " in out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.strip()}
    assert "OPENAI_API_KEY not set" in lines["gpt"] and " no " in lines["gpt"]
    assert "openai/gpt-4o" in lines["gpt"]
    assert "anthropic/claude-sonnet-4-5" in lines["claude"] and " yes " in lines["claude"]
    assert "embedded" in lines["local"]
    assert "sk-ant-test" not in out  # a key's value is never shown


def test_models_list_json_and_user_alias(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123456789")
    (tmp_path / "mine.yaml").write_text("name: mine\nmodel: openai/gpt-4o-mini\n")
    (tmp_path / "typo.yaml").write_text("name: typo\nmodel: opena/gpt-4o\n")
    code, out, err = run_cli(["models", "list", "--json", "--judges-dir", str(tmp_path)], capsys)
    assert code == 0, err
    d = json.loads(out)
    aliases = {a["name"]: a for a in d["aliases"]}
    assert aliases["mine"]["spec"] == "openai/gpt-4o-mini" and aliases["mine"]["usable"] is True
    assert aliases["typo"]["usable"] is False and "did you mean 'openai'" in aliases["typo"]["why"]
    kinds = {b["name"]: b for b in d["backends"]}
    assert kinds["openai"]["key_env"] == "OPENAI_API_KEY" and kinds["openai"]["usable"] is True
    vllm_ok = __import__("importlib").util.find_spec("vllm") is not None
    assert kinds["vllm"]["usable"] is vllm_ok
    assert "fake" in kinds  # plug-in backends are listed too


def _fill(cache_dir, n, spec):
    client = ModelClient(spec, ClientSettings(cache_dir=str(cache_dir)))

    async def go():
        await asyncio.gather(*(client.chat([{"role": "user", "content": f"q{i}"}]) for i in range(n)))

    asyncio.run(go())


def test_cache_stats_and_clear(fake_model, tmp_path, capsys, monkeypatch):
    a = fake_model("a", fakes.default_responder)
    b = fake_model("b", fakes.default_responder)
    _fill(tmp_path, 5, a)
    _fill(tmp_path, 3, b)
    d = ["--cache-dir", str(tmp_path)]

    def stats():
        return json.loads(run_cli(["cache", "stats", *d, "--json"], capsys)[1])

    st = stats()
    assert st["rows"] == 8 and st["by_model"] == {a: 5, b: 3} and st["bytes"] > 0
    out = run_cli(["cache", "stats", *d], capsys)[1]
    assert "rows: 8" in out and f"5  {a}" in out
    assert "deleted 3 rows" in run_cli(["cache", "clear", *d, "--model", b, "--yes"], capsys)[1]
    assert stats()["by_model"] == {a: 5}
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, out, _ = run_cli(["cache", "clear", *d], capsys)
    assert code != 0 and "Delete every row" in out
    assert "deleted 5 rows" in run_cli(["cache", "clear", *d, "-y"], capsys)[1]
    assert stats()["rows"] == 0


def test_cache_cli_honours_env_dir(fake_model, tmp_path, capsys, monkeypatch):
    spec = fake_model("env", fakes.default_responder)
    _fill(tmp_path / "envcache", 2, spec)
    monkeypatch.setenv("MASCOT_RESPONSE_CACHE_DIR", str(tmp_path / "envcache"))
    assert json.loads(run_cli(["cache", "stats", "--json"], capsys)[1])["rows"] == 2
    monkeypatch.setenv("MASCOT_RESPONSE_CACHE_DIR", str(tmp_path / "none"))
    out = run_cli(["cache", "stats"], capsys)[1]
    assert "not created yet" in out and "rows: 0" in out
    assert not (tmp_path / "none").exists()  # stats does not create a cache


def test_models_and_cache_help(capsys):
    for cmd in (["models", "list", "--help"], ["cache", "stats", "--help"], ["cache", "clear", "--help"]):
        code, out, _ = run_cli(cmd, capsys)
        assert code == 0 and "Usage:" in out
    from mascot_eval.cli.main import LazyGroup

    assert {"models", "cache"} <= set(LazyGroup().list_commands(None))


@pytest.fixture(autouse=True)
def _no_leak():
    yield
    fakes.RESPONDERS.clear()
