"""Our metrics as local Hugging Face ``evaluate`` modules, loaded by path (hub modules cannot load offline).

    import evaluate
    from mascot_eval.metrics.evaluate_modules import module_path

    m = evaluate.load(module_path("mascot_metrics"), "inter_agent_selfbleu")   # one metric
    m.compute(transcripts=[t.to_json() ...])                                  # -> {"inter_agent_selfbleu": ...}
    r = evaluate.load(module_path("mascot_redundancy"))
    r.compute(predictions=[["reply 1", "reply 2", "reply 3"], ...])           # replies to the same prompt

``mascot_metrics`` takes transcripts (JSON strings or dicts in the ``mascot-transcript/1`` format); its
config name is a metric name from ``mascot-eval metrics --list`` or ``default`` (all metrics). Values are
the means :func:`mascot_eval.metrics.table.system_means` prints (each dialogue weighs the same).
``mascot_redundancy`` takes groups of replies and returns inter-agent self-BLEU, ROUGE-L and (optionally)
MiniLM cosine per group and on average, plus distinct-n over all replies. Both call
:func:`mascot_eval.metrics.compute.compute`, so the numbers equal the CLI's.
"""

from __future__ import annotations

from ... import paths
from ...errors import UserError

HERE = paths.evaluate_modules_dir()


def available() -> list[str]:
    """Names of the bundled evaluate modules."""
    return sorted(p.name for p in HERE.iterdir() if p.is_dir() and (p / f"{p.name}.py").is_file())


def module_path(name: str = "mascot_metrics") -> str:
    """Path of a bundled module's script, for ``evaluate.load(path)``."""
    script = HERE / name / f"{name}.py"
    if not script.is_file():
        raise UserError(f"unknown evaluate module '{name}'; bundled: {', '.join(available())}")
    return str(script)
