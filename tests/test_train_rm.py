"""Reward model learns a separable preference set; LoRA trainable-parameter share is computed."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.torch

TOPICS = ["my exam", "my new job", "my dog's surgery", "my sister's wedding", "the move", "my team lead",
          "the deadline", "my grandmother", "the interview", "my breakup", "the promotion", "my friend's silence",
          "the rent", "my thesis", "the diagnosis", "the argument", "my first marathon", "the layoffs",
          "my neighbour", "the trip"]
WARM = ["I hear how much {t} weighs on you; it makes sense to feel this way.",
        "That sounds really hard. Thank you for telling me about {t}; I'm here with you."]
COLD = ["Whatever. {t} is not a big deal, stop complaining.",
        "Honestly nobody cares about {t}. Move on."]


def test_reward_model_beats_chance_on_heldout_pairs():
    from mascot_eval.backends.modeldir import embedded_model_dir
    from mascot_eval.train.config import RewardModelSpec
    from mascot_eval.train.reward_model import pairwise_accuracy, train_reward_model

    pairs = []
    for i, t in enumerate(TOPICS):
        pairs.append({"chosen_text": WARM[i % 2].format(t=t), "rejected_text": COLD[(i // 2) % 2].format(t=t),
                      "split": "heldout" if i >= 14 else "train"})
    spec = RewardModelSpec(epochs=15, learning_rate=0.01, batch_size=8, max_length=48)
    rows = []
    rm, m = train_reward_model(str(embedded_model_dir()), "embedded", spec, pairs, seed=0, log=rows.append)
    assert m["train_pairs"] == 14 and m["heldout_pairs"] == 6
    assert m["heldout_acc"] > 0.5 and m["heldout_acc"] >= 5 / 6  # well above chance on unseen topics
    assert rows[-1]["loss"] < rows[0]["loss"]
    # swapping chosen and rejected flips the accuracy
    flipped = [{"chosen_text": p["rejected_text"], "rejected_text": p["chosen_text"]} for p in pairs if p["split"] == "heldout"]
    assert pairwise_accuracy(rm, flipped) == pytest.approx(1 - m["heldout_acc"])


def test_reward_model_round_trip(tmp_path):
    from mascot_eval.backends.modeldir import embedded_model_dir
    from mascot_eval.train.config import RewardModelSpec
    from mascot_eval.train.reward_model import RewardModel, train_reward_model

    pairs = [{"chosen_text": WARM[0].format(t=t), "rejected_text": COLD[0].format(t=t), "split": "train"} for t in TOPICS[:4]]
    rm, m = train_reward_model(str(embedded_model_dir()), "embedded", RewardModelSpec(epochs=2, max_length=32), pairs)
    rm.save(tmp_path / "rm", m)
    again = RewardModel.load(tmp_path / "rm")
    texts = [pairs[0]["chosen_text"], pairs[0]["rejected_text"]]
    assert again.score(texts) == pytest.approx(rm.score(texts), abs=1e-5)


def test_lora_share_matches_paper_for_qwen3_8b_shape():
    """LoRA r=16 on q/k/v/o of a Qwen3-8B-shaped model is 0.187% of the parameters (built on the meta device)."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, Qwen3Config

    from mascot_eval.train.basemodel import lora_config, trainable_share
    from mascot_eval.train.config import LoraSpec

    cfg = Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
        peft_model = get_peft_model(model, lora_config(LoraSpec(r=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])))
    share = trainable_share(peft_model)
    assert share["trainable_params"] == 36 * 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2)  # 15,335,424
    assert share["trainable_pct"] == pytest.approx(0.187, abs=0.001)
