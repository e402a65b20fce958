"""Shared test set-up: offline hub variables, the data directory, markers and a scripted backend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent


def _data_dir() -> Path | None:
    env = os.environ.get("MASCOT_DATA_DIR")
    if env and Path(env).is_dir():
        return Path(env)
    guess = REPO.parent / "shared" / "data"
    return guess if guess.is_dir() else None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    d = _data_dir()
    if d is None:
        pytest.fail("MASCOT_DATA_DIR is not set and ../shared/data is missing; the real-data tests need it")
    return d


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
