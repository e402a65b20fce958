"""SFT: pi_SFT, the policy Stage 1 samples from, and the ``sft`` adapter the shipped ``sft`` baseline uses.

Data (``sft/data.jsonl``): human supporter replies from real conversations (``sft.data.tasks``:
EmpatheticDialogues listener turns, ESConv supporter turns), from conversations outside every
evaluation sample. Each example is (the conversation up to a supporter turn, that human reply). The
prompt is rendered with the agent template of ``sft.system`` (default: the evaluated system), for a
persona of the group taken in turn, exactly as that system would prompt its speaker there; the
target is the human's reply. Training: trl ``SFTTrainer`` on a LoRA adapter (loss on the reply only),
written to ``adapters/sft`` when finished.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..fileio import stable_hash
from .basemodel import check_targets, lora_config, set_threads, trainable_share
from .config import TrainConfig
from .view import SystemView, human_states


def sft_examples(cfg: TrainConfig, data_dir: str | Path | None, cards) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(rows, stats): prompt messages rendered by ``sft.system``, the human reply as the completion."""
    import random

    from ..taskspec import load_task
    from .sample import pool_of

    sd = cfg.sft.data
    assert sd is not None
    names = [c.name for c in cards]
    per_task = math.ceil(sd.examples / len(sd.tasks))
    rows: list[dict[str, Any]] = []
    stats: dict[str, Any] = {"conversations": 0, "too_long": 0, "per_task": {}}
    for tname in sd.tasks:
        task = load_task(cfg.path_in_config(tname))
        view = SystemView.build(cfg.sft_system_ref, task, model=cfg.base_model)
        pool = pool_of(cfg, task, data_dir, exclude=sd.exclude_eval_contexts, path=sd.path)
        random.Random(stable_hash([cfg.seed, "sft", task.name])).shuffle(pool)
        got = 0
        for ctx in pool:
            if got >= per_task:
                break
            pairs = human_states(ctx, task, sd.replies_per_context, view.system.config.name, names)
            if pairs:
                stats["conversations"] += 1
            for st, reply in pairs:
                if len(reply.split()) > sd.max_reply_words:
                    stats["too_long"] += 1
                    continue
                card = view.speaker_card(st)
                rows.append(
                    {
                        "key": st.key,
                        "task": task.name,
                        "context_id": ctx.id,
                        "persona": card.id,
                        "prompt": view.speaker_messages(st, card, None),
                        "completion": [{"role": "assistant", "content": reply}],
                    }
                )
                got += 1
                if got >= per_task:
                    break
        stats["per_task"][task.name] = got
    rows = rows[: sd.examples]
    if not rows:
        raise UserError(
            f"{cfg.file or 'config'}: field 'sft.data.tasks': no human replies found for SFT; "
            "check the tasks' sources (EmpatheticDialogues or ESConv conversations)"
        )
    stats["examples"] = len(rows)
    return rows, stats


def run_sft(
    *,
    cfg: TrainConfig,
    base_path: str,
    tokenizer,
    rows: list[dict[str, Any]],
    out_dir: Path,
    log: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Train the SFT LoRA adapter; written to a temporary sibling, renamed into ``out_dir`` when finished."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from ..backends.local import chat_template_kwargs
    from .basemodel import load_causal_lm
    from .grpo import is_main_process

    s = cfg.sft
    set_threads()
    model = load_causal_lm(base_path, cfg.base_model, bf16=s.bf16)
    check_targets(model, s.lora, "sft.lora")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.work."))
    kw = chat_template_kwargs(tokenizer)
    data = [{"prompt": r["prompt"], "completion": r["completion"], **({"chat_template_kwargs": kw} if kw else {})} for r in rows]
    last: dict[str, Any] = {}

    class LogToJsonl(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ARG002 - transformers' signature
            if logs and is_main_process():
                row = {k: v for k, v in logs.items() if isinstance(v, (int, float)) and math.isfinite(v)}
                last.update(row)
                log({"stage": "sft", "step_name": "sft", "name": "sft", "step": state.global_step, **row})

    args = SFTConfig(
        output_dir=str(work),
        num_train_epochs=s.epochs,
        per_device_train_batch_size=s.batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        learning_rate=s.learning_rate,
        max_length=s.max_length,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=cfg.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=s.bf16,
        gradient_checkpointing=s.gradient_checkpointing,
        disable_tqdm=True,
        completion_only_loss=True,
        dataset_num_proc=None,
    )
    t0 = time.perf_counter()
    try:
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(data),
            processing_class=tokenizer,
            peft_config=lora_config(s.lora),
            callbacks=[LogToJsonl()],
        )
        share = trainable_share(trainer.model)
        if is_main_process():
            log({"stage": "sft", "step_name": "lora", "name": "sft", **share})
        trainer.train()
        if trainer.accelerator.is_main_process:
            tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp."))
            # transformers types Trainer.model as its constructor argument (PreTrainedModel | nn.Module | None);
            # after __init__ it is the (PEFT-wrapped) model, which has save_pretrained
            trainer.model.save_pretrained(str(tmp))  # type: ignore[union-attr, operator]
            if out_dir.exists():
                shutil.rmtree(out_dir)
            os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    losses = [v for k, v in last.items() if k == "loss"]
    return {
        **share,
        "examples": len(rows),
        "epochs": s.epochs,
        "seconds": round(time.perf_counter() - t0, 1),
        "final_loss": losses[-1] if losses else None,
        "train_loss": last.get("train_loss"),
    }
