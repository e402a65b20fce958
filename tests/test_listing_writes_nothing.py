"""Commands that list or show never convert, download or write: they say what a run would do."""

from __future__ import annotations

import pytest

from tests.cli_helpers import run_cli

LISTINGS = [
    ["tasks", "list"],
    ["tasks", "show", "demo"],
    ["tasks", "show", "ed-positive"],
    ["tasks", "show", "esconv", "-n", "1"],
    ["systems", "list"],
    ["systems", "show", "mascot"],
    ["systems", "show", "zero-shot", "--model", "embedded"],
    ["models", "list"],
    ["models", "list", "--json"],
    ["cache", "stats"],
    ["cache", "stats", "--json"],
]


@pytest.fixture
def fresh_user(tmp_path, monkeypatch):
    """Online, no data folder, a user cache and home that do not exist yet; conversions and downloads
    are recorded instead of done."""
    from mascot_eval.backends import modeldir
    from mascot_eval.data import sources

    for var in ("MASCOT_DATA_DIR", "MASCOT_RESPONSE_CACHE_DIR", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "MASCOT_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    done: list[str] = []

    def no_convert(src, out):
        done.append(f"convert {src}")
        raise AssertionError("a listing converted the embedded model")

    def no_download(url):
        done.append(f"download {url}")
        raise OSError("a listing downloaded a dataset")

    monkeypatch.setattr(modeldir, "_convert", no_convert)
    monkeypatch.setattr(sources, "_http_get", no_download)
    return tmp_path, home, done


def test_listing_commands_write_nothing(fresh_user, capsys):
    tmp, home, done = fresh_user
    outputs = {}
    for args in LISTINGS:
        code, out, err = run_cli(args, capsys)
        assert code == 0, (args, err)
        outputs[" ".join(args)] = out
    assert done == []
    assert not (tmp / "cache").exists()
    assert [p for p in home.rglob("*")] == []
    cache = tmp / "cache"
    embedded = next(ln for ln in outputs["models list"].splitlines() if ln.startswith("embedded "))
    assert " yes " in embedded and "wheel installed, not yet converted; the first run converts it" in embedded
    assert f"517 MiB in {cache / 'models'}" in embedded
    vllm = next(ln for ln in outputs["models list"].splitlines() if ln.startswith("vllm "))
    assert ("first run converts it" in vllm) == (" yes " in vllm)  # vllm/embedded uses the same folder
    shown = outputs["tasks show ed-positive"]
    assert "loader: empathetic_dialogues" in shown
    assert (
        f"# contexts: not loaded: empathetic_dialogues/test.csv is not in {cache / 'datasets'} yet; "
        "the first run downloads empathetic_dialogues there"
    ) in shown
    assert "not created yet; the first run creates it" in outputs["cache stats"]


def test_models_list_says_converted_once_it_is(fresh_user, capsys):
    from mascot_eval.backends import modeldir

    tmp, _, done = fresh_user
    target = modeldir.embedded_state().folder
    assert target is not None and not target.exists()
    target.mkdir(parents=True)
    (target / modeldir.MARKER).write_text("{}")
    code, out, _ = run_cli(["models", "list"], capsys)
    assert code == 0 and done == []
    embedded = next(ln for ln in out.splitlines() if ln.startswith("embedded "))
    assert f"ok: wheel installed, converted ({target})" in embedded
    assert modeldir.embedded_model_dir() == target  # what a run then uses, without converting


def test_cache_stats_reads_a_live_cache_without_changing_it(tmp_path, fake_model, capsys):
    import asyncio

    from mascot_eval.backends.cache import FILENAME
    from mascot_eval.backends.client import ClientSettings, ModelClient
    from tests import fakes

    spec = fake_model("live", fakes.default_responder)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path)))
    asyncio.run(client.chat([{"role": "user", "content": "q"}]))

    def files():  # the -shm index is SQLite's reader coordination, touched by every reader
        return {p.name: p.read_bytes() if not p.name.endswith("-shm") else b"" for p in tmp_path.iterdir()}

    before = files()
    code, out, _ = run_cli(["cache", "stats", "--cache-dir", str(tmp_path), "--json"], capsys)
    assert code == 0 and '"rows": 1' in out
    assert files() == before and FILENAME in before


def test_cache_stats_reports_a_corrupt_file_and_leaves_it(tmp_path, capsys):
    import json

    from mascot_eval.backends.cache import FILENAME

    (tmp_path / FILENAME).write_bytes(b"garbage" * 1000)
    code, out, _ = run_cli(["cache", "stats", "--cache-dir", str(tmp_path), "--json"], capsys)
    st = json.loads(out)
    assert code == 0 and st["rows"] == 0 and "not a database" in st["unreadable"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILENAME]  # nothing moved aside or created
    code, out, _ = run_cli(["cache", "stats", "--cache-dir", str(tmp_path)], capsys)
    assert "unreadable: file is not a database; the next run moves it aside" in out
