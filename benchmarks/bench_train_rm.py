"""Benchmark: the reward-model step (trl RewardTrainer + peft LoRA) on two encoders, same pairs, same run.

Why: the tiny training preset runs in CI on a 2-core CPU; its reward model reads up to 128 tokens per
sequence. This measures one RewardTrainer epoch on the policy's own base (embedded SmolLM2-135M, LoRA
r=8 on q/k/v/o) against the bundled all-MiniLM-L6-v2 (22M, LoRA r=8 on query/key/value/dense), and the
held-out accuracy each reaches, on the same synthetic persona-check pairs (a Catalyst reply that asks a
question vs one that does not; whole topics held out). CPU time (``time.process_time``) is the measure
(other jobs share this machine); wall time and the load average are recorded too.

Writes ``benchmarks/results/train_rm.json``. Run:
``.venv/bin/python benchmarks/bench_train_rm.py``
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
    "my car",
    "the surgery",
    "my son",
    "the wedding",
    "my landlord",
    "the exam results",
    "my coach",
    "the recital",
    "my savings",
    "the new city",
    "my flight",
    "the party",
]
ASK = ["What part of {t} worries you the most right now?", "How are you feeling about {t} today?"]
TELL = ["I think {t} will be fine in the end.", "That is a lot to deal with around {t}."]


def pairs() -> list[dict]:
    out = []
    for i, t in enumerate(TOPICS):
        messages = [
            {"role": "system", "content": "You are Catalyst, the critical thinker: curious and probing."},
            {"role": "user", "content": f"User: I keep thinking about {t}.\nReply as Catalyst."},
        ]
        for j in range(2):
            out.append(
                {
                    "messages": messages,
                    "chosen": ASK[j].format(t=t),
                    "rejected": TELL[(i + j) % 2].format(t=t),
                    "split": "heldout" if i % 4 == 0 else "train",
                }
            )
    return out


def main() -> None:
    from mascot_eval.train.config import LoraSpec, RewardModelSpec
    from mascot_eval.train.reward_model import encoder_path, train_reward_model

    data = pairs()
    encoders = {
        "embedded": LoraSpec(r=8, alpha=16, dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
        "minilm": LoraSpec(r=8, alpha=16, dropout=0.0, target_modules=["query", "key", "value", "dense"]),
    }
    results: dict = {}
    for name, lora in encoders.items():
        spec = RewardModelSpec(
            base_model=name, epochs=1, learning_rate=3e-4, batch_size=8, max_length=128, lora=lora, gradient_checkpointing=False
        )
        load0 = os.getloadavg()[0]
        c0, w0 = time.process_time(), time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            m = train_reward_model(encoder_path(name), name, spec, data, Path(tmp) / "rm", seed=0)
        results[name] = {
            "cpu_seconds": round(time.process_time() - c0, 2),
            "wall_seconds": round(time.perf_counter() - w0, 2),
            "heldout_accuracy": m["heldout_accuracy"],
            "heldout_pairs": m["heldout_pairs"],
            "train_pairs": m["train_pairs"],
            "trainable_params": m.get("lora_trainable_params"),
            "load_average_before": round(load0, 2),
        }
        print(name, results[name], flush=True)
    out = {
        "benchmark": "train_rm",
        "pairs": len(data),
        "epochs": 1,
        "max_length": 128,
        "encoders": results,
        "cpu_ratio_embedded_over_minilm": round(results["embedded"]["cpu_seconds"] / results["minilm"]["cpu_seconds"], 2),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_after": round(os.getloadavg()[0], 2),
        },
    }
    path = Path(__file__).resolve().parent / "results" / "train_rm.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
