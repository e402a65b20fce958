"""GRPO on a LoRA adapter (trl GRPOTrainer + peft), shared by the persona and Director stages.

The adapter is written to a temporary sibling and renamed into place when training finished, so an
interrupted run never leaves a half-written adapter that a rerun would mistake for a finished one.
Every trl log line (loss, reward and its components, KL, entropy, ...) is appended to the training log.
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

from ..backends.local import chat_template_kwargs
from .basemodel import check_targets, load_causal_lm, lora_config, set_threads, trainable_share
from .config import GrpoSpec, LoraSpec

RewardFn = Callable[..., list[float | None]]

KEEP = (
    "loss",
    "reward",
    "reward_std",
    "kl",
    "entropy",
    "grad_norm",
    "learning_rate",
    "completions/mean_length",
    "completions/clipped_ratio",
    "frac_reward_zero_std",
    # reward parts logged by our reward functions (trl's log_metric): Stage 1 and Stage 2
    "rm_score",
    "format",
    "group_judge",
    "redundancy",
    "speaker_redundancy",
    "invalid_directive",
    "unscored_blocks",
    "judged_blocks",
)


from .dist import is_main_process  # noqa: E402  (re-exported: used by every stage)


def _clean_logs(logs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in logs.items():
        if k in KEEP or k.startswith("rewards/") or k.startswith("train_"):
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            out[k] = v
    return out


def run_grpo(
    *,
    name: str,
    stage: str,
    base_path: str,
    base_spec: str,
    tokenizer,
    rows: list[dict[str, Any]],
    reward_fn: RewardFn,
    spec: GrpoSpec,
    lora: LoraSpec,
    out_dir: Path,
    seed: int,
    log: Callable[[dict[str, Any]], None],
    init_adapter: Path | None = None,
    generation_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train a LoRA adapter with GRPO on ``rows`` (each with a ``prompt``: messages, or a string already in the
    chat template); save it to ``out_dir``. ``init_adapter`` (e.g. the SFT adapter) is the starting point: it is
    trained further, and with ``beta > 0`` trl keeps a frozen copy of it as the KL reference (pi_SFT)."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    set_threads()
    if os.environ.get("WORLD_SIZE", "1") == "1":  # leftovers of a run killed mid-training (single process only:
        # under accelerate another rank's fresh work folder would match too)
        for stale in [*out_dir.parent.glob(f".{out_dir.name}.work.*"), *out_dir.parent.glob(f".{out_dir.name}.tmp.*")]:
            shutil.rmtree(stale, ignore_errors=True)
    model = load_causal_lm(base_path, base_spec, bf16=spec.bf16)
    check_targets(model, lora, f"{stage}.lora")
    peft_config = lora_config(lora)
    if init_adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(init_adapter), is_trainable=True)
        peft_config = None
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.work."))
    last: dict[str, Any] = {}

    class LogToJsonl(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ARG002 - trl's signature
            if logs and is_main_process():
                row = _clean_logs(logs)
                if row:
                    last.update(row)
                    log({"stage": stage, "step_name": "grpo", "name": name, "step": state.global_step, **row})

    vllm: dict[str, Any] = (
        {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": spec.vllm_server_base_url} if spec.use_vllm else {}
    )
    args = GRPOConfig(
        output_dir=str(work),
        max_steps=spec.steps,
        per_device_train_batch_size=spec.batch_size,
        gradient_accumulation_steps=spec.gradient_accumulation_steps,
        num_generations=spec.num_generations,
        max_completion_length=spec.max_completion_length,
        learning_rate=spec.learning_rate,
        beta=spec.beta,
        temperature=spec.temperature,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=spec.bf16,
        gradient_checkpointing=spec.gradient_checkpointing,
        disable_tqdm=True,
        chat_template_kwargs=chat_template_kwargs(tokenizer) or None,
        generation_kwargs=generation_kwargs,
        **vllm,
    )
    t0 = time.perf_counter()
    try:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[reward_fn],
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=[LogToJsonl()],
        )
        share = trainable_share(trainer.model)
        if is_main_process():
            log({"stage": stage, "step_name": "lora", "name": name, **share})
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
    return {
        **share,
        "steps": spec.steps,
        "seconds": round(time.perf_counter() - t0, 1),
        "final": {k: v for k, v in last.items() if not k.startswith("train_")},
        "train_loss": last.get("train_loss"),
    }
