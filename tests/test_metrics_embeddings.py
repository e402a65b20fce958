"""The lean MiniLM forward pass against sentence-transformers, the embedding cache, and threads."""

from __future__ import annotations

import numpy as np
import pytest

from mascot_eval.errors import UserError
from mascot_eval.metrics import embeddings as E
from mascot_eval.metrics.minilm import MiniLMEncoder

TEXTS = [
    "I hear you. That sounds really hard.", "Have you tried writing it down?", "", "Ok", "ok",
    "Caf\u00e9 na\u00efve \u2014 emojis \U0001F600 and CJK \u4f60\u597d",
    "a very long text " * 120,  # truncated to 256 word pieces
    "Short.", "Another sentence of medium length about dogs, cats and weekends.",
]


@pytest.fixture
def embed_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MASCOT_EMBED_CACHE", "1")
    monkeypatch.setattr(E, "_STORES", {})
    return tmp_path / "cache"


@pytest.mark.slow
def test_lean_forward_equals_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(E.model_dir()), device="cpu")
    ref = st.encode(TEXTS, normalize_embeddings=True, batch_size=4)
    f32 = MiniLMEncoder(E.model_dir(), "float32")
    ours = f32.encode(TEXTS)
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    assert ((ours * ref).sum(1) >= 0.99999).all()
    bf16 = MiniLMEncoder(E.model_dir(), "bfloat16").encode(TEXTS)
    assert ((bf16 * ref).sum(1) >= 0.999).all()
    # the same token ids as transformers' tokenizer, truncation included
    assert f32.token_ids(TEXTS) == st.tokenizer(TEXTS, truncation=True, max_length=256)["input_ids"]
    assert len(f32.token_ids([TEXTS[6]])[0]) == 256


def test_chunking_and_workers_do_not_change_values():
    enc = MiniLMEncoder(E.model_dir(), "float32")
    whole = enc.encode(TEXTS)
    chunked = enc.encode(TEXTS, tokens_per_chunk=16, workers=2)  # many small chunks, two threads
    assert np.allclose(whole, chunked, atol=1e-5)
    assert np.allclose(whole[3], whole[4])  # "Ok" and "ok": the model is uncased
    assert enc.encode([]).shape == (0, 384)


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
    assert len(shards) == 2 and E.IMPL in str(shards[0].parent.name)
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
    assert info["dtype"] == "float32" and info["normalized"] and E.IMPL in info["implementation"]
    monkeypatch.setenv("MASCOT_EMBEDDING_MODEL_DIR", "/nonexistent")
    with pytest.raises(UserError, match="config.json"):
        E.model_dir()


def test_torch_thread_count_is_restored():
    import torch

    before = torch.get_num_threads()
    E._encoder("float32").encode(["restore my threads"])
    assert torch.get_num_threads() == before


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
