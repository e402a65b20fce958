"""The real-data test set-up (tests/datasets.py): a fresh clone fetches the datasets once through the
project's downloaders when online, and skips the data tests with one reason when offline."""

from __future__ import annotations

import functools
import http.server
import io
import json
import tarfile
import threading
from pathlib import Path

import pytest

from mascot_eval.data import sources
from tests import datasets

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def www(tmp_path):
    """A static HTTP server on 127.0.0.1 serving tmp_path/www; yields (root, url, request paths)."""
    root = tmp_path / "www"
    root.mkdir()
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def _releases(root: Path, url: str, data_dir: Path, monkeypatch) -> None:
    """Serve the releases the downloaders fetch: ED and QMSum from the real files, ESConv synthetic
    (its raw ESConv.json is not among the test data; its pins are re-pointed to the synthetic bytes)."""
    buf = io.BytesIO()
    real = (data_dir / "empathetic_dialogues" / "test.csv").read_bytes()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for split, data in (("train", real[:4000]), ("valid", real[:4000]), ("test", real)):
            info = tarfile.TarInfo(f"empatheticdialogues/{split}.csv")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (root / "ed.tar.gz").write_bytes(buf.getvalue())
    monkeypatch.setattr(sources, "ED_TARBALL", f"{url}/ed.tar.gz")
    for d in ("Academic", "Committee", "Product"):
        (root / d / "jsonl").mkdir(parents=True)
        test = (data_dir / "qmsum" / d / "jsonl" / "test.jsonl").read_bytes()
        (root / d / "jsonl" / "test.jsonl").write_bytes(test)
        for split in ("train", "val"):
            (root / d / "jsonl" / f"{split}.jsonl").write_bytes(test.split(b"\n")[0] + b"\n")
    monkeypatch.setattr(sources, "QMSUM_RAW", url)
    original = [
        {
            "emotion_type": "anxiety",
            "problem_type": f"p{i}",
            "situation": f"s{i}",
            "dialog": [{"speaker": "seeker", "content": f"hi {i}", "annotation": {}}],
        }
        for i in range(20)
    ]
    raw = json.dumps(original).encode()
    (root / "ESConv.json").write_bytes(raw)
    test = "".join(json.dumps(e) + "\n" for e in sources.esconv_official_split(original)["test"]).encode()
    monkeypatch.setattr(sources, "ESCONV_RAW", f"{url}/ESConv.json")
    monkeypatch.setitem(sources.KNOWN_BLOBS, "esconv/ESConv.json", sources.git_blob_id(raw))
    monkeypatch.setitem(sources.KNOWN_BLOBS, "esconv/test.txt", sources.git_blob_id(test))


def _views(tmp_path: Path):
    import tempfile

    return lambda: Path(tempfile.mkdtemp(prefix="view", dir=tmp_path))


def test_a_fresh_clone_online_downloads_once_into_the_cache(www, tmp_path, data_dir, monkeypatch):
    root, url, seen = www
    _releases(root, url, data_dir, monkeypatch)
    clone, cache = tmp_path / "clone" / "repo", tmp_path / "cache" / "datasets"
    found = datasets.find_data({}, clone, cache, _views(tmp_path))
    assert found.origin == "download" and found.reason == ""
    assert sorted(seen) == sorted(
        ["/ed.tar.gz", "/ESConv.json"]
        + [f"/{d}/jsonl/{s}.jsonl" for d in ("Academic", "Committee", "Product") for s in ("train", "val", "test")]
    )
    assert (cache / "empathetic_dialogues" / "valid.csv").is_file()  # the whole release is cached ...
    shown = sorted(str(p.relative_to(found.path)) for p in found.path.rglob("*") if not p.is_dir())
    assert shown == sorted(f for files in datasets.FILES.values() for f in files)  # ... the tests see the test files
    assert (found.path / "empathetic_dialogues" / "test.csv").read_bytes() == (
        data_dir / "empathetic_dialogues" / "test.csv"
    ).read_bytes()
    again = datasets.find_data({}, clone, cache, _views(tmp_path))
    assert again.origin == "cache" and len(seen) == 11  # nothing fetched twice


def test_offline_without_data_gives_one_reason_and_fetches_nothing(www, tmp_path):
    _, _, seen = www
    found = datasets.find_data({"HF_HUB_OFFLINE": "1"}, tmp_path / "clone" / "repo", tmp_path / "cache", _views(tmp_path))
    assert found.path is None and seen == []
    assert found.reason.startswith("real-data tests skipped: no MASCOT_DATA_DIR")
    assert "offline (HF_HUB_OFFLINE=1)" in found.reason and "set MASCOT_DATA_DIR" in found.reason
    assert "\n" not in found.reason


def test_no_network_skips_and_a_tampered_release_fails(www, tmp_path, monkeypatch):
    root, url, _ = www
    monkeypatch.setattr(sources, "ED_TARBALL", f"{url}/missing.tar.gz")  # 404: as good as no network
    found = datasets.find_data({}, tmp_path / "clone" / "repo", tmp_path / "cache", _views(tmp_path))
    assert found.path is None and "the download failed (could not download" in found.reason
    (root / "Academic" / "jsonl").mkdir(parents=True)
    for split in ("train", "val", "test"):
        (root / "Academic" / "jsonl" / f"{split}.jsonl").write_bytes(b"{}\n")
    monkeypatch.setattr(sources, "QMSUM_RAW", url)
    (tmp_path / "cache2" / "empathetic_dialogues").mkdir(parents=True)
    (tmp_path / "cache2" / "empathetic_dialogues" / "test.csv").write_bytes(b"x")
    from mascot_eval.errors import UserError

    with pytest.raises(UserError, match="do not match the pinned release"):
        datasets.find_data({}, tmp_path / "clone" / "repo", tmp_path / "cache2", _views(tmp_path))


def test_data_folder_order(tmp_path):
    shared = tmp_path / "shared" / "data"
    shared.mkdir(parents=True)
    repo = tmp_path / "repo"
    assert (
        datasets.find_data({"MASCOT_DATA_DIR": str(tmp_path)}, repo, tmp_path / "c", _views(tmp_path)).origin == "MASCOT_DATA_DIR"
    )
    assert datasets.find_data({}, repo, tmp_path / "c", _views(tmp_path)) == datasets.Found(shared, "../shared/data")
    bad = datasets.find_data({"MASCOT_DATA_DIR": str(tmp_path / "nope")}, repo, tmp_path / "c", _views(tmp_path))
    assert bad.path is None and "is not a folder" in bad.reason


def test_a_fresh_clone_offline_skips_the_data_tests_with_one_reason(tmp_path):
    """pytest itself, in a copy of the tests with no ../shared beside it: data tests skip, others run."""
    import os
    import shutil
    import subprocess
    import sys

    clone = tmp_path / "fresh" / "repo"
    shutil.copytree(REPO / "tests", clone / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", clone / "pyproject.toml")
    # the caller's own data and offline settings stay out: the skip reason is checked word for word
    env = {k: v for k, v in os.environ.items() if k not in ("MASCOT_DATA_DIR", "MASCOT_CACHE_DIR", "MASCOT_OFFLINE")}
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        MASCOT_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONPATH=os.pathsep.join([str(clone), str(REPO)]),
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/test_tasks.py::test_every_shipped_task_validates_on_the_real_data",
            "tests/test_tasks.py::test_missing_data_file",
            "tests/test_tasks.py::test_suites",
            "tests/test_loaders.py::test_ed_every_quirk_is_met_and_counted",
        ],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed, 3 skipped" in r.stdout
    reasons = [ln for ln in r.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert len(reasons) == 1 and "[3]" in reasons[0], r.stdout  # one line, one reason for all three
    assert (
        "real-data tests skipped: no MASCOT_DATA_DIR" in reasons[0]
        and "offline (HF_DATASETS_OFFLINE=1, HF_HUB_OFFLINE=1)" in reasons[0]
    )
    assert not (tmp_path / "cache").exists()
