"""`mascot-eval models list` and `mascot-eval cache stats|clear`."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from mascot_eval.backends.cache import FILENAME
from mascot_eval.backends.client import ClientSettings, ModelClient
from mascot_eval.cli.main import cli
from tests import fakes


def _invoke(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_models_list_shows_backends_aliases_and_usability(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-shown-123456")
    r = _invoke("models", "list")
    assert r.exit_code == 0, r.output
    out = r.output
    for kind in ("openai", "anthropic", "openai-compatible", "embedded", "hf", "vllm"):
        assert f"\n{kind} " in out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.strip()}
    assert "OPENAI_API_KEY not set" in lines["gpt"] and " no " in lines["gpt"]
    assert "openai/gpt-4o" in lines["gpt"]
    assert "anthropic/claude-sonnet-4-5" in lines["claude"] and " yes " in lines["claude"]
    assert "embedded" in lines["local"]
    assert "sk-ant-test" not in out  # a key's value is never shown


def test_models_list_json_and_user_alias(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123456789")
    (tmp_path / "mine.yaml").write_text("name: mine\nmodel: openai/gpt-4o-mini\n")
    (tmp_path / "typo.yaml").write_text("name: typo\nmodel: opena/gpt-4o\n")
    r = _invoke("models", "list", "--json", "--judges-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
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


def test_cache_stats_and_clear(fake_model, tmp_path):
    a = fake_model("a", fakes.default_responder)
    b = fake_model("b", fakes.default_responder)
    _fill(tmp_path, 5, a)
    _fill(tmp_path, 3, b)
    r = _invoke("cache", "stats", "--cache-dir", str(tmp_path), "--json")
    st = json.loads(r.output)
    assert st["rows"] == 8 and st["by_model"] == {a: 5, b: 3} and st["bytes"] > 0
    r = _invoke("cache", "stats", "--cache-dir", str(tmp_path))
    assert "rows: 8" in r.output and f"5  {a}" in r.output
    r = _invoke("cache", "clear", "--cache-dir", str(tmp_path), "--model", b, "--yes")
    assert "deleted 3 rows" in r.output
    assert json.loads(_invoke("cache", "stats", "--cache-dir", str(tmp_path), "--json").output)["by_model"] == {a: 5}
    r = CliRunner().invoke(cli, ["cache", "clear", "--cache-dir", str(tmp_path)], input="n\n")
    assert r.exit_code != 0 and "Delete every row" in r.output
    r = _invoke("cache", "clear", "--cache-dir", str(tmp_path), "-y")
    assert "deleted 5 rows" in r.output
    assert json.loads(_invoke("cache", "stats", "--cache-dir", str(tmp_path), "--json").output)["rows"] == 0


def test_cache_cli_honours_env_dir(fake_model, tmp_path):
    spec = fake_model("env", fakes.default_responder)
    _fill(tmp_path / "envcache", 2, spec)
    r = _invoke("cache", "stats", "--json", env={"MASCOT_RESPONSE_CACHE_DIR": str(tmp_path / "envcache")})
    assert json.loads(r.output)["rows"] == 2
    r = _invoke("cache", "stats", env={"MASCOT_RESPONSE_CACHE_DIR": str(tmp_path / "none")})
    assert "not created yet" in r.output and "rows: 0" in r.output
    assert not (tmp_path / "none" / FILENAME).exists()  # stats does not create a cache


def test_cache_stats_reports_a_corrupt_file(tmp_path):
    (tmp_path / FILENAME).write_bytes(b"garbage" * 1000)
    r = CliRunner().invoke(cli, ["cache", "stats", "--cache-dir", str(tmp_path), "--json"])
    assert r.exit_code == 0
    st = json.loads(r.stdout)
    assert st["rows"] == 0 and ".corrupt-" in st["moved_aside"]
    assert "is unreadable" in r.stderr and st["moved_aside"] in r.stderr
    assert list(tmp_path.glob(FILENAME + ".corrupt-*"))


def test_models_and_cache_help():
    for cmd in (["models", "list", "--help"], ["cache", "stats", "--help"], ["cache", "clear", "--help"]):
        r = _invoke(*cmd)
        assert r.exit_code == 0 and "Usage:" in r.output
    from mascot_eval.cli.main import LazyGroup

    assert {"models", "cache"} <= set(LazyGroup().list_commands(None))


@pytest.fixture(autouse=True)
def _no_leak():
    yield
    fakes.RESPONDERS.clear()
