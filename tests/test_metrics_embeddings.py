"""Embeddings through sentence-transformers: the package's vectors are the library's, the cache
(per text, on disk, keyed by model, dtype and implementation), threads, settings and errors."""

from __future__ import annotations

import numpy as np
import pytest

from mascot_eval.errors import UserError
from mascot_eval.metrics import embeddings as E

TEXTS = [
    "I hear you. That sounds really hard.",
    "Have you tried writing it down?",
    "",
    "Ok",
    "ok",
    "Caf\u00e9 na\u00efve \u2014 emojis \U0001f600 and CJK \u4f60\u597d",
    "a very long text " * 120,  # truncated to 256 word pieces
    "Short.",
    "Another sentence of medium length about dogs, cats and weekends.",
]


@pytest.fixture
def embed_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MASCOT_EMBED_CACHE", "1")
    monkeypatch.setenv("MASCOT_EMBED_DTYPE", "float32")
    monkeypatch.setattr(E, "_STORES", {})
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def reference():
    """The library itself, loaded the plain way, float32."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(E.model_dir()), device="cpu")


def test_embed_returns_the_sentence_transformers_vectors(embed_cache, reference):
    ref = reference.encode(TEXTS, normalize_embeddings=True)
    ours = E.embed(TEXTS)
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert np.abs(ours - ref).max() <= 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    assert np.allclose(ours[3], ours[4])  # "Ok" and "ok": the model is uncased
    # the same vectors whatever else shares the call (batches are padded to their longest text)
    alone = [E._encoder("float32").encode([t])[0] for t in TEXTS[:3]]
    assert np.abs(np.stack(alone) - ref[:3]).max() <= 1e-5
    assert E._encoder("float32").model.max_seq_length == 256
    assert len(reference.tokenizer(TEXTS[6], truncation=True, max_length=256)["input_ids"]) == 256


def test_bfloat16_stays_close_to_float32(reference):
    ref = reference.encode(TEXTS, normalize_embeddings=True)
    bf16 = E._encoder("bfloat16").encode(TEXTS)
    assert bf16.dtype == np.float32 and ((bf16 * ref).sum(1) >= 0.99).all()


def test_cache_key_follows_model_dtype_and_implementation(monkeypatch):
    base = E.cache_key("float32")
    assert base.startswith("all-minilm-l6-v2-") and base != E.cache_key("bfloat16")
    versions = dict(E._library_versions())
    monkeypatch.setattr(E, "_library_versions", lambda: {**versions, "sentence-transformers": "99.0"})
    assert E.cache_key("float32") != base  # another library version: other numbers possible, other key
    monkeypatch.setattr(E, "_library_versions", lambda: versions)
    assert E.cache_key("float32") == base
    monkeypatch.setattr(E, "BATCH_SIZE", 64)
    assert E.cache_key("float32") != base
    monkeypatch.setattr(E, "BATCH_SIZE", 32)
    monkeypatch.setattr(E, "_wheel_version", lambda: "0.2.0")
    assert E.cache_key("float32") != base


def test_missing_sentence_transformers_is_one_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(UserError, match=r"need torch and sentence-transformers \(sentence_transformers is missing\)"):
        E._Encoder("float32")


def test_loading_prints_no_progress_bar(capfd):
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    for enabled in (True, False):
        (hf_logging.enable_progress_bar if enabled else hf_logging.disable_progress_bar)()
        E._Encoder("float32")
        assert "Loading" not in capfd.readouterr().err
        assert hf_logging.is_progress_bar_enabled() is enabled  # the caller's setting is restored
    (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()


def test_embed_caches_per_text_on_disk(embed_cache, monkeypatch):
    calls = []
    real = E._encoder

    def counting(dtype):
        enc = real(dtype)

        class Wrapped:
            def encode(self, texts):
                calls.append(list(texts))
                return enc.encode(texts)

        return Wrapped()

    monkeypatch.setattr(E, "_encoder", counting)
    a = E.embed(["one text", "two text", "one text"])
    assert calls == [["one text", "two text"]]  # duplicates embedded once
    assert np.allclose(a[0], a[2])
    b = E.embed(["two text", "three"])
    assert calls[-1] == ["three"]
    assert np.allclose(a[1], b[0])
    shards = list(embed_cache.rglob("shard-*.npz"))
    assert len(shards) == 2 and shards[0].parent.name == E.cache_key("float32")
    monkeypatch.setattr(E, "_STORES", {})  # a new process: the disk shards are read back
    c = E.embed(["one text", "three"])
    assert len(calls) == 2
    assert np.allclose(c[0], a[0]) and np.allclose(c[1], b[1])
    monkeypatch.setenv("MASCOT_EMBED_CACHE", "0")
    E.embed(["one text"])
    assert calls[-1] == ["one text"]
    assert E.embed([]).shape == (0, 384)


def test_settings_errors_and_info(monkeypatch):
    monkeypatch.setenv("MASCOT_EMBED_THREADS", "two")
    with pytest.raises(UserError, match="MASCOT_EMBED_THREADS"):
        E.embed_threads()
    monkeypatch.setenv("MASCOT_EMBED_THREADS", "64")
    assert 1 <= E.embed_threads() <= 64
    monkeypatch.setenv("MASCOT_EMBED_DTYPE", "fp8")
    with pytest.raises(UserError, match="MASCOT_EMBED_DTYPE"):
        E.resolve_dtype()
    monkeypatch.setenv("MASCOT_EMBED_DTYPE", "float32")
    info = E.embedding_info()
    assert info["dtype"] == "float32" and info["normalized"] and info["implementation"] == "sentence-transformers"
    assert info["cache_key"] == E.cache_key("float32") and info["libraries"]["sentence-transformers"]
    monkeypatch.setenv("MASCOT_EMBEDDING_MODEL_DIR", "/nonexistent")
    with pytest.raises(UserError, match="config.json"):
        E.model_dir()


def test_torch_threads_while_encoding_and_restored(monkeypatch):
    import torch

    enc = E._encoder("float32")
    seen = []
    real = enc.model.encode

    def spy(*a, **kw):
        seen.append(torch.get_num_threads())
        return real(*a, **kw)

    monkeypatch.setattr(enc.model, "encode", spy)
    monkeypatch.setenv("MASCOT_EMBED_THREADS", "1")
    before = torch.get_num_threads()
    enc.encode(["restore my threads"])
    assert seen == [1] and torch.get_num_threads() == before


def test_background_embedding_errors_surface_and_are_skipped_when_unneeded():
    from mascot_eval.metrics.compute import compute
    from tests.metric_helpers import TableEmbedder, dialogue

    d = dialogue([("u", [("A", "x y"), ("B", "x z")])])

    def broken(texts):
        raise UserError("embedding model missing (test)")

    with pytest.raises(UserError, match="missing"):
        compute([d], ["distinct_1", "inter_agent_cosine"], embedder=broken)
    emb = TableEmbedder()
    df = compute([d], ["distinct_1", "inter_agent_selfbleu"], embedder=emb)
    assert emb.calls == [] and set(df["metric"]) == {"distinct_1", "inter_agent_selfbleu"}
    # output order follows the requested order even though embedding metrics run last
    df = compute([d], ["inter_agent_cosine", "distinct_1"], embedder=emb)
    assert list(dict.fromkeys(df["metric"])) == ["inter_agent_cosine", "distinct_1"]
