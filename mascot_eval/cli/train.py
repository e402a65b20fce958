"""`mascot-eval train sft|stage1|stage2|all --config CONFIG.yaml --out DIR`: the reference MASCOT trainer."""

from __future__ import annotations

import click

from ..errors import UserError

STAGE_HELP = {
    "sft": "Supervised fine-tuning on human supporter replies (prompts rendered by the evaluated system): writes "
    "adapters/sft, pi_SFT for Stage 1 and the adapter the `sft` baseline uses.",
    "stage1": "Persona alignment (runs SFT first when needed): roll out the evaluated system, sample K replies per state "
    "from pi_SFT, judge, build pairs (delta), train the Bradley-Terry reward model (trl RewardTrainer), GRPO a LoRA "
    "adapter per persona.",
    "stage2": "Director optimisation: roll out N-turn blocks with the Stage-1 speakers, GRPO the Director's LoRA adapter "
    "on the group reward (judges' group rubric + format - eta * redundancy).",
    "all": "SFT, Stage 1, then Stage 2 (each step skipped when its artifact is already in --out).",
}


@click.group()
def train() -> None:
    """Train MASCOT checkpoints (persona adapters + Director adapter) from a config.

    Every step is resumable: rerun the same command after an interruption and finished steps are
    skipped. The output folder is what `mascot-eval run --system mascot --checkpoint DIR` evaluates
    (`--checkpoint DIR@http://host:8000/v1` through a vLLM server that serves its adapters).
    Presets (--config NAME, from baselines/train/ of the user folder or the shipped data): tiny (CPU,
    minutes), gpu-smoke (one GPU), paper (8 GPUs).
    """


def _config_file(value: str):
    """--config: a YAML path, or a preset name looked up in baselines/train/ (user folder, then shipped)."""
    from pathlib import Path

    from .. import paths

    p = Path(value)
    if p.exists() or p.suffix in (".yaml", ".yml") or len(p.parts) > 1:
        return p
    presets = paths.entries("baselines", "train")
    if value not in presets:
        raise UserError(f"--config {value}: no such file and no preset of that name; presets: {', '.join(presets) or '(none)'}")
    return presets[value]


def _stage_command(stage: str) -> click.Command:
    @click.command(name=stage, help=STAGE_HELP[stage])
    @click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(dir_okay=False),
        help="training config YAML, or a preset name from baselines/train/ (tiny, paper)",
    )
    @click.option(
        "--out",
        "out",
        type=click.Path(file_okay=False),
        default=None,
        help="output folder (default: results/checkpoints/<config name>)",
    )
    @click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="datasets folder (else MASCOT_DATA_DIR)")
    @click.option("--max-connections", type=int, default=None, help="concurrent model calls (default: config max_connections)")
    @click.option(
        "--data-only",
        is_flag=True,
        help="run every step but GRPO (SFT, rollouts, candidates, judging, pairs, reward model) in this process; "
        "for multi-GPU runs do this once, then `accelerate launch` the same command without it",
    )
    def cmd(config_path: str, out: str | None, data_dir: str | None, max_connections: int | None, data_only: bool) -> None:
        from pathlib import Path

        from .. import paths
        from ..backends.client import ClientSettings
        from ..train.config import load_config
        from ..train.run import train as run_train

        cfg = load_config(_config_file(config_path))
        out_dir = Path(out) if out else paths.results_dir() / "checkpoints" / cfg.name
        if out_dir.exists() and not out_dir.is_dir():
            raise UserError(f"--out {out_dir}: exists and is not a folder")
        settings = ClientSettings(max_connections=max_connections or cfg.max_connections)
        data = paths.data_dir(data_dir)
        say = lambda m: click.echo(m, err=True)  # noqa: E731
        ck = run_train(cfg, out_dir, stage, data_dir=data, settings=settings, say=say, data_only=data_only)
        run = ck.get("runs", [{}])[-1]
        adapters = ", ".join(sorted(ck.get("adapters", {}))) or "none"
        click.echo(
            f"checkpoint: {out_dir / 'checkpoint.json'} (adapters: {adapters}); {run.get('seconds')} s, "
            f"peak memory {run.get('peak_rss_mb')} MB"
        )

    return cmd


for _s in ("sft", "stage1", "stage2", "all"):
    train.add_command(_stage_command(_s))


@train.command(name="serve")
@click.argument("checkpoint_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--port", type=int, default=8000, show_default=True)
def serve_cmd(checkpoint_dir: str, port: int) -> None:
    """Print the vLLM command that serves a checkpoint's adapters under their names, for
    `mascot-eval run --checkpoint DIR@http://127.0.0.1:PORT/v1` (thinking mode off for Qwen3)."""
    import json
    import shlex
    from pathlib import Path

    from ..systems.checkpoint import load_checkpoint

    ck = load_checkpoint(checkpoint_dir)
    mods, rank = [], 8
    for name in sorted(ck.adapters):
        folder = ck.adapter_dir(name, needed_by="train serve")
        rank = max(rank, int(json.loads((folder / "adapter_config.json").read_text()).get("r", 8)))
        mods.append(f"{name}={folder}")
    base = ck.raw.get("served_base_model") or ck.base_model.split("/", 1)[-1]
    if ck.base_model == "embedded":
        base = ck.raw.get("base_model_info", {}).get("path") or base
    cmd = [
        "vllm",
        "serve",
        base,
        "--port",
        str(port),
        "--enable-lora",
        "--max-lora-rank",
        str(rank),
        "--max-loras",
        str(max(1, len(mods))),
        "--lora-modules",
        *mods,
        "--default-chat-template-kwargs",
        '{"enable_thinking": false}',
    ]
    click.echo(" ".join(shlex.quote(c) for c in cmd))
    click.echo(
        f"# then: mascot-eval run --system mascot --checkpoint {Path(checkpoint_dir)}@http://127.0.0.1:{port}/v1 ...", err=True
    )
