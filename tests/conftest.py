"""Shared test set-up: offline hub variables, the data directory, markers and a scripted backend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import datasets

_START_ENV = datasets.environment_at_start()  # before the offline defaults below: decides downloads
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent


def _dataset_cache() -> Path:
    from mascot_eval.data.sources import cache_root

    return cache_root()


_DATASET_CACHE = _dataset_cache()  # the user cache as pytest started (tests may point MASCOT_CACHE_DIR elsewhere)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """The real datasets (see tests/datasets.py): MASCOT_DATA_DIR, ../shared/data, the user cache, or
    downloaded into it once when online; otherwise every data test is skipped with one reason."""
    found = datasets.find_data(_START_ENV, REPO, _DATASET_CACHE, lambda: tmp_path_factory.mktemp("data"))
    if found.path is None:
        pytest.skip(found.reason)
    return found.path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Report every data-test skip at the data_dir fixture, so `-rs` prints the reason on one line."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and isinstance(rep.longrepr, tuple) and str(rep.longrepr[2]).startswith(f"Skipped: {datasets.NO_DATA}"):
        rep.longrepr = (__file__, None, rep.longrepr[2])


@pytest.fixture(autouse=True, scope="session")
def _empty_user_folder(tmp_path_factory):
    """Tests see the shipped data only: a developer's ~/.config/mascot-eval or MASCOT_HOME plays no part."""
    os.environ["MASCOT_HOME"] = str(tmp_path_factory.mktemp("mascot-home"))


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch) -> Path:
    """An isolated user cache for tests that write to it (embedded-model conversion stays shared)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("MASCOT_RESPONSE_CACHE_DIR", str(d))
    return d


@pytest.fixture
def fake_model():
    """Returns `script(name, responder) -> "fake/<name>"`; responders are cleared afterwards."""
    from tests import fakes

    yield fakes.script
    fakes.RESPONDERS.clear()
    fakes.PROB_RESPONDERS.clear()
    fakes.CALLS.clear()
