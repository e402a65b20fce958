"""Training configs for tests: the tiny preset's structure with scripted models (no training needed for
the data steps), and a fake model that answers speakers with replies and the Director with directives."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "baselines" / "train" / "tiny.yaml"
AGENT = ("emotion", "empathy", "consistency", "relevance", "contribution")
NAMES = ("Anchor", "Catalyst", "Beacon")


def team_responder(req) -> str:
    """Director prompts get a JSON directive naming the first agent not yet heard this round; speakers a
    short reply that varies with the sample index (so K candidates differ)."""
    text = "\n".join(m["content"] for m in req.messages)
    if "Director" in req.messages[0]["content"] or "direct a support team" in req.messages[0]["content"]:
        spoken = text.split("Already spoke this round:")[-1] if "Already spoke this round:" in text else ""
        name = next((n for n in NAMES if n not in spoken), NAMES[0])
        return json.dumps({"speaker": name, "action": "help", "tone": "warm"})
    h = hashlib.sha256(f"{text}|{req.params.sample_index}".encode()).digest()
    options = [
        "That sounds really hard. What feels heaviest right now?",
        "Your effort shows real strength.",
        "ok",
        "I hear how painful this is, it makes sense to feel that way.",
    ]
    return options[h[0] % len(options)]


def judge_responder(req) -> str:
    """Deterministic pseudo-scores from the prompt; one prompt in six gets prose (unscored)."""
    h = hashlib.sha256(req.messages[-1]["content"].encode()).digest()
    if h[0] % 6 == 0:
        return "I think this reply is fine."
    return json.dumps({"rationale": "scripted", **{c: 1 + h[i + 1] % 5 for i, c in enumerate(AGENT)}})


def config_data(fake_model, **stage1) -> dict:
    """tiny.yaml with a scripted sampler/judge, the demo task (no data dir), no SFT, 2 candidates."""
    data = yaml.safe_load(TINY.read_text())
    data["sampling_model"] = fake_model("team", team_responder)
    data["judge"] = fake_model("judge", judge_responder)
    data["evaluation_judges"] = ["local"]
    data["system"] = str(REPO / "baselines" / "train" / "systems" / "mascot-tiny.yaml")
    data["data"] = {"tasks": ["demo"], "contexts": 3, "exclude_eval_contexts": False}
    data["sft"] = {"enabled": False}
    data["stage1"]["rollouts"] = {"rounds": 1}
    data["stage1"]["candidates"] = 3
    data["stage1"]["min_pairs"] = 1
    data["stage1"]["min_pairs_per_persona"] = 1
    data["stage1"]["reward_model"].update({"epochs": 1, "max_length": 48, "heldout_fraction": 0.34})
    data["stage1"].update(stage1)
    return data


def write_config(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(data))
    return p
