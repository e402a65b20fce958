"""Model spec strings: parsing, endpoints, LoRA suffixes and "did you mean" for unknown specs."""

from __future__ import annotations

import pytest

from mascot_eval.backends.client import backend_name, make_backend
from mascot_eval.backends.spec import parse_spec
from mascot_eval.errors import UserError


def test_parse_plain_and_endpoint():
    p = parse_spec("openai/gpt-4o")
    assert (p.backend, p.model, p.endpoint, p.lora) == ("openai", "gpt-4o", None, None)
    p = parse_spec("openai-compatible/Org/Model-1@http://127.0.0.1:8000/v1", allow_endpoint=True)
    assert p.backend == "openai-compatible"
    assert p.model == "Org/Model-1"  # a model id may contain slashes
    assert p.endpoint == "http://127.0.0.1:8000/v1"
    # without allow_endpoint the '@' stays part of the model name
    assert parse_spec("hf/a@b").model == "a@b"


def test_parse_lora(tmp_path):
    p = parse_spec(f"embedded#lora={tmp_path}", allow_lora=True)
    assert p.backend == "embedded" and p.model == "" and p.lora == tmp_path
    assert p.base_spec == "embedded"
    with pytest.raises(UserError, match="LoRA adapters"):
        parse_spec(f"openai/gpt-4o#lora={tmp_path}")
    with pytest.raises(UserError, match="empty adapter folder"):
        parse_spec("embedded#lora=", allow_lora=True)
    with pytest.raises(UserError, match="unknown suffix"):
        parse_spec("embedded#rank=8", allow_lora=True)


@pytest.mark.parametrize("bad", ["", " openai/gpt-4o", "openai/gpt-4o "])
def test_parse_rejects_blank_or_padded(bad):
    with pytest.raises(UserError, match="empty or has surrounding spaces"):
        parse_spec(bad)


def test_bad_endpoint_scheme():
    with pytest.raises(UserError, match="must start with http:// or https://"):
        parse_spec("openai-compatible/m@127.0.0.1:8000", allow_endpoint=True)


def test_backend_name():
    assert backend_name("embedded") == "embedded"
    assert backend_name("embedded#lora=/x") == "embedded"
    assert backend_name("vllm/embedded#lora=/x") == "vllm"


@pytest.mark.parametrize(
    "spec, suggestion",
    [("opena/gpt-4o", "openai"), ("antropic/claude-sonnet-4-5", "anthropic"), ("embeded", "embedded"), ("vlm/x", "vllm")],
)
def test_unknown_spec_did_you_mean(spec, suggestion):
    with pytest.raises(UserError) as ei:
        make_backend(spec)
    msg = str(ei.value)
    assert f"unknown model spec '{spec}'" in msg
    assert f"did you mean '{suggestion}'" in msg
    assert "openai-compatible" in msg  # lists the known kinds


def test_unknown_spec_without_close_match():
    with pytest.raises(UserError) as ei:
        make_backend("zzzzqqq/x")
    assert "did you mean" not in str(ei.value)
    assert "anthropic" in str(ei.value)


def test_spec_errors_are_specific():
    with pytest.raises(UserError, match="needs its URL"):
        make_backend("openai-compatible/model")
    with pytest.raises(UserError, match="no model name"):
        make_backend("openai/")
    with pytest.raises(UserError, match="takes no name"):
        make_backend("embedded/SmolLM")
    with pytest.raises(UserError, match="does not exist"):
        make_backend("hf/" + "/nonexistent/model/folder")


def test_cache_identity_has_endpoint_and_no_key(monkeypatch):
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-secret-identity-0000")
    a = make_backend("openai-compatible/m@http://127.0.0.1:1/v1")
    b = make_backend("openai-compatible/m@http://127.0.0.1:2/v1")
    assert a.cache_identity != b.cache_identity
    assert "sk-secret" not in repr(a.cache_identity)
    assert a.cache_identity == {"kind": "openai-compatible", "model": "m", "endpoint": "http://127.0.0.1:1/v1"}
