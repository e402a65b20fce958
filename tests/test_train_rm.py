"""The reward model (trl RewardTrainer + peft): it learns a separable preference set and generalises to
held-out topics; its held-out accuracy comes with n and a binomial interval; the saved folder scores the
same after reloading; the LoRA trainable share matches the paper's for a Qwen3-8B shape."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.torch

TOPICS = [
    "my exam",
    "my new job",
    "my dog's surgery",
    "my sister's wedding",
    "the move",
    "my team lead",
    "the deadline",
    "my grandmother",
    "the interview",
    "my breakup",
    "the promotion",
    "my friend's silence",
    "the rent",
    "my thesis",
    "the diagnosis",
    "the argument",
    "my first marathon",
    "the layoffs",
    "my neighbour",
    "the trip",
]
ASK = ["What part of {t} worries you the most right now?", "How are you feeling about {t} today?"]
TELL = ["I think {t} will be fine in the end.", "That is a lot to deal with around {t}."]
MINILM_LORA = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["query", "key", "value", "dense"]}


def _pairs():
    out = []
    for i, t in enumerate(TOPICS):
        messages = [
            {"role": "system", "content": "You are Catalyst, the critical thinker."},
            {"role": "user", "content": f"User: I keep thinking about {t}.\nReply as Catalyst."},
        ]
        for j in range(2):
            out.append(
                {
                    "messages": messages,
                    "chosen": ASK[j].format(t=t),
                    "rejected": TELL[(i + j) % 2].format(t=t),
                    "split": "heldout" if i >= 14 else "train",
                }
            )
    return out


def test_binomial_interval():
    from mascot_eval.train.reward_model import binomial_interval

    lo, hi = binomial_interval(40, 50)
    assert 0.66 < lo < 0.67 and 0.89 < hi < 0.91  # Clopper-Pearson, exact
    assert binomial_interval(0, 0) is None
    assert binomial_interval(25, 50)[0] < 0.5 < binomial_interval(25, 50)[1]


def test_reward_model_beats_chance_on_heldout_pairs(tmp_path):
    from mascot_eval.train.config import RewardModelSpec
    from mascot_eval.train.reward_model import RewardScorer, encoder_path, train_reward_model

    pairs = _pairs()
    spec = RewardModelSpec(
        base_model="minilm",
        epochs=4,
        learning_rate=1e-3,
        batch_size=8,
        max_length=64,
        lora=MINILM_LORA,
        gradient_checkpointing=False,
    )
    rows: list[dict] = []
    m = train_reward_model(encoder_path("minilm"), "minilm", spec, pairs, tmp_path / "rm", seed=0, log=rows.append)
    assert m["trainer"] == "trl.RewardTrainer" and m["train_pairs"] == 28 and m["heldout_pairs"] == 12
    assert [r["step_name"] for r in rows] == ["reward_model"] * 4 and all(r["heldout_pairs"] == 12 for r in rows)
    assert m["heldout_accuracy"] >= 10 / 12 and m["heldout_ci95"][0] > 0.5  # well above chance on unseen topics
    assert rows[-1]["loss"] < rows[0]["loss"]
    # the saved folder (peft adapter + score head) scores the same after reloading; swapping flips the order
    scorer = RewardScorer(tmp_path / "rm")
    held = [p for p in pairs if p["split"] == "heldout"]
    rc = scorer.score([p["messages"] for p in held], [p["chosen"] for p in held])
    rr = scorer.score([p["messages"] for p in held], [p["rejected"] for p in held])
    assert sum(a > b for a, b in zip(rc, rr)) / len(held) == pytest.approx(m["heldout_accuracy"])


def test_lora_share_matches_paper_for_qwen3_8b_shape():
    """LoRA r=16 on q/k/v/o of a Qwen3-8B-shaped model is 0.187% of the parameters (built on the meta device)."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, Qwen3Config

    from mascot_eval.train.basemodel import lora_config, trainable_share
    from mascot_eval.train.config import LoraSpec

    cfg = Qwen3Config(
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
        peft_model = get_peft_model(model, lora_config(LoraSpec(r=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])))
    share = trainable_share(peft_model)
    assert share["trainable_params"] == 36 * 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2)  # 15,335,424
    assert share["trainable_pct"] == pytest.approx(0.187, abs=0.001)
