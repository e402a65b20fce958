"""The persona-aware Bradley-Terry reward model.

r(x, y) = w . standardise(pool(h_base(persona card + conversation + reply))) + b, trained on
preference pairs with the Bradley-Terry loss ``-log sigmoid(r(chosen) - r(rejected))``. By default
the base model is frozen and only the head learns (pooled states are computed once and cached);
``reward_model.lora`` also tunes a LoRA adapter on the base. Saved as ``reward_model/head.safetensors``
(+ ``lora/``), ``config.json`` and ``metrics.json``; the base weights are referenced, not copied.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..fileio import atomic_write_json
from ..personas import PersonaCard
from .config import RewardModelSpec


def bt_loss(r_chosen, r_rejected):
    """Bradley-Terry negative log-likelihood, averaged: mean(-log sigmoid(r_w - r_l))."""
    import torch.nn.functional as F

    return -F.logsigmoid(r_chosen - r_rejected).mean()


def rm_text(card: PersonaCard, turns: list[dict[str, str]], reply: str) -> str:
    """What the reward model reads: the persona, the conversation and the candidate reply."""
    conv = "\n".join(f"{'User' if t['speaker'] == 'user' else t['speaker']}: {' '.join(t['text'].split())}" for t in turns)
    return (
        f"Persona: {card.name}, the {card.role}. Traits: {', '.join(card.traits)}. Style: {card.speaking_style}\n"
        f"Conversation:\n{conv}\nReply by {card.name}: {' '.join(reply.split())}"
    )


class RewardModel:
    """Base encoder + standardisation + linear head. Use :meth:`score` for rewards."""

    def __init__(self, base_path: str, spec: RewardModelSpec, *, base_spec: str = "", device: str | None = None) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        device = device or default_device()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(base_path)
            # on a GPU the (large) base runs in bf16 on this process's device; the head stays float32
            dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
            self.base = AutoModel.from_pretrained(base_path, dtype=dtype).to(device)
        except (OSError, ValueError) as exc:
            raise UserError(f"reward model: cannot load base model {base_spec or base_path} ({str(exc).splitlines()[0][:200]})") from None
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.truncation_side = "left"  # keep the reply, which is at the end
        self.tokenizer.padding_side = "right"
        self.spec = spec
        self.base_path = base_path
        self.base_spec = base_spec
        self.device = device
        hidden = int(self.base.config.hidden_size)
        self.hidden = hidden
        self.head = torch.nn.Linear(hidden, 1).to(device)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)
        self.mu = torch.zeros(hidden, device=device)
        self.sigma = torch.ones(hidden, device=device)
        self.lora = False
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.base.eval()
        self._cache: dict[str, Any] = {}

    # encoding
    def _pool(self, texts: list[str]):
        import torch

        enc = self.tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=self.spec.max_length)
        out = self.base(input_ids=enc["input_ids"].to(self.device), attention_mask=enc["attention_mask"].to(self.device))
        h = out.last_hidden_state
        mask = enc["attention_mask"].to(h.device).unsqueeze(-1).to(h.dtype)
        if self.spec.pooling == "mean":
            return ((h * mask).sum(1) / mask.sum(1).clamp(min=1.0)).float()
        idx = enc["attention_mask"].sum(1).to(h.device) - 1
        return h[torch.arange(h.shape[0], device=h.device), idx].float()

    def features(self, texts: list[str], *, grad: bool = False, batch: int = 8):
        import torch

        if grad:
            return self._pool(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        with torch.no_grad():
            for i in range(0, len(missing), batch):
                chunk = missing[i : i + batch]
                for t, f in zip(chunk, self._pool(chunk)):
                    self._cache[t] = f.detach()
        return torch.stack([self._cache[t] for t in texts])

    def reward_from_features(self, feats):
        return self.head((feats - self.mu) / self.sigma).squeeze(-1)

    def score(self, texts: list[str]) -> list[float]:
        import torch

        with torch.no_grad():
            feats = self._pool(texts) if self.lora else self.features(texts)
            return [float(x) for x in self.reward_from_features(feats)]

    # persistence
    def save(self, folder: Path, metrics: dict[str, Any]) -> None:
        from safetensors.torch import save_file

        folder.mkdir(parents=True, exist_ok=True)
        save_file(
            {"weight": self.head.weight.detach().cpu().contiguous(), "bias": self.head.bias.detach().cpu().contiguous(),
             "mu": self.mu.cpu().contiguous(), "sigma": self.sigma.cpu().contiguous()},
            str(folder / "head.safetensors"),
        )
        if self.lora:
            self.base.save_pretrained(str(folder / "lora"))
        atomic_write_json(
            folder / "config.json",
            {"base_path": self.base_path, "base_spec": self.base_spec, "hidden_size": self.hidden, "lora": self.lora,
             **self.spec.model_dump(mode="json")},
        )
        atomic_write_json(folder / "metrics.json", metrics)

    @classmethod
    def load(cls, folder: Path) -> RewardModel:
        from safetensors.torch import load_file

        cfg = json.loads((folder / "config.json").read_text())
        spec = RewardModelSpec.model_validate({k: v for k, v in cfg.items() if k in RewardModelSpec.model_fields})
        rm = cls(cfg["base_path"], spec, base_spec=cfg.get("base_spec", ""))
        if cfg.get("lora"):
            from peft import PeftModel

            rm.base = PeftModel.from_pretrained(rm.base, str(folder / "lora"))
            rm.base.eval()
            rm.lora = True
        t = load_file(str(folder / "head.safetensors"))
        rm.head.weight.data.copy_(t["weight"])
        rm.head.bias.data.copy_(t["bias"])
        rm.mu, rm.sigma = t["mu"].to(rm.device), t["sigma"].to(rm.device)
        return rm


def default_device() -> str:
    """This process's GPU under accelerate/torchrun (LOCAL_RANK), else the CPU."""
    import os

    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


def pairwise_accuracy(rm: RewardModel, pairs: list[dict[str, Any]]) -> float | None:
    """Share of pairs where r(chosen) > r(rejected); None without pairs."""
    if not pairs:
        return None
    rc = rm.score([p["chosen_text"] for p in pairs])
    rr = rm.score([p["rejected_text"] for p in pairs])
    return sum(1 for a, b in zip(rc, rr) if a > b) / len(pairs)


def train_reward_model(
    base_path: str,
    base_spec: str,
    spec: RewardModelSpec,
    pairs: list[dict[str, Any]],
    *,
    seed: int = 0,
    log: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[RewardModel, dict[str, Any]]:
    """Train on ``split == "train"`` pairs (``chosen_text``/``rejected_text``); report held-out accuracy per epoch."""
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    train = [p for p in pairs if p.get("split", "train") == "train"]
    held = [p for p in pairs if p.get("split") == "heldout"]
    if not train:
        raise UserError("reward model: no training pairs (all pairs are held out); lower reward_model.heldout_fraction")
    rm = RewardModel(base_path, spec, base_spec=base_spec)
    all_texts = [t for p in train for t in (p["chosen_text"], p["rejected_text"])]
    feats = rm.features(all_texts)
    rm.mu = feats.mean(0)
    rm.sigma = feats.std(0).clamp(min=1e-4) if feats.shape[0] > 1 else torch.ones_like(rm.mu)
    params = list(rm.head.parameters())
    if spec.lora is not None:
        from peft import get_peft_model

        from .basemodel import lora_config

        rm.base = get_peft_model(rm.base, lora_config(spec.lora, task_type="FEATURE_EXTRACTION"))
        rm.base.train()
        rm.lora = True
        params += [p for p in rm.base.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=spec.learning_rate, weight_decay=spec.weight_decay)
    history: list[dict[str, Any]] = []
    for epoch in range(1, spec.epochs + 1):
        order = list(range(len(train)))
        rng.shuffle(order)
        losses, correct = [], 0
        for i in range(0, len(order), spec.batch_size):
            batch = [train[j] for j in order[i : i + spec.batch_size]]
            cw = [p["chosen_text"] for p in batch]
            cl = [p["rejected_text"] for p in batch]
            fw = rm.features(cw, grad=rm.lora)
            fl = rm.features(cl, grad=rm.lora)
            rw, rl = rm.reward_from_features(fw), rm.reward_from_features(fl)
            loss = bt_loss(rw, rl)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()) * len(batch))
            correct += int((rw > rl).sum())
        if rm.lora:
            rm.base.eval()
        row = {
            "stage": "stage1",
            "step_name": "reward_model",
            "epoch": epoch,
            "loss": sum(losses) / len(train),
            "train_acc": correct / len(train),
            "heldout_acc": pairwise_accuracy(rm, held),
            "train_pairs": len(train),
            "heldout_pairs": len(held),
        }
        if rm.lora:
            rm.base.train()
        history.append(row)
        if log:
            log(row)
    if rm.lora:
        rm.base.eval()
    last = history[-1]
    metrics = {
        "train_pairs": len(train),
        "heldout_pairs": len(held),
        "final_loss": last["loss"],
        "train_acc": pairwise_accuracy(rm, train),
        "heldout_acc": pairwise_accuracy(rm, held),
        "epochs": spec.epochs,
    }
    return rm, metrics
