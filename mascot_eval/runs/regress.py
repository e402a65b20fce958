"""CI regression check: did a candidate (a new checkpoint's run) drop below a baseline?

A measure *fails* when it got worse by more than its tolerance **and** the test says the change is
real (Holm-corrected p < alpha over the measures checked). Baselines:

* a run directory: paired test on the contexts both runs share (Wilcoxon signed-rank on
  dialogue-level differences, or the sign-flip permutation test);
* a leaderboard CSV (``mascot-eval leaderboard --out``): no per-context values exist, so the
  candidate's dialogue-level values are tested against the published baseline mean (one-sample
  Wilcoxon signed-rank / sign-flip test on value - baseline).

Unusable inputs (different tasks, a missing criterion, no shared contexts, an ambiguous system)
raise UserError (exit 2).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import UserError, did_you_mean
from ..stats.bootstrap import bootstrap_mean
from ..stats.compare import dialogue_values
from ..stats.paired import holm, paired_permutation_test, wilcoxon_signed_rank
from .rundir import RunDir
from .tables import ALL_JUDGES, RunData, load_runs, measure_order

SPEC_RE = re.compile(r"^(?P<measure>[A-Za-z0-9_.\-]+?)(?::(?P<dir>higher|lower))?(?:=(?P<tol>[0-9.]+))?$")
LOWER_IS_BETTER_HINT = "append ':lower' or ':higher' (e.g. metric.inter_agent_selfbleu:lower)"


@dataclass
class Check:
    measure: str
    higher_is_better: bool
    tolerance: float


@dataclass
class RegressRow:
    split: str
    measure: str
    baseline: float
    candidate: float
    change: float  # candidate - baseline
    change_lo: float
    change_hi: float
    n: int
    p: float
    p_holm: float = float("nan")
    tolerance: float = 0.0
    higher_is_better: bool = True
    verdict: str = ""


@dataclass
class RegressResult:
    rows: list[RegressRow]
    mode: str  # "paired" | "one-sample"
    test: str
    alpha: float
    baseline: str
    candidate: str
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.verdict == "FAIL" for r in self.rows)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.__dict__ for r in self.rows])

    def table(self) -> str:
        header = ["split", "measure", "baseline", "candidate", "change", "95% CI", "n", "p_holm", "tol", "verdict"]
        lines = [header]
        for r in self.rows:
            d = 1 if r.measure.split(".")[0] in ("agent", "group") else 3
            lines.append([
                r.split, r.measure + ("" if r.higher_is_better else " (lower=better)"), f"{r.baseline:.{d}f}",
                f"{r.candidate:.{d}f}", f"{r.change:+.{d}f}", f"[{r.change_lo:+.{d}f}, {r.change_hi:+.{d}f}]", str(r.n),
                "–" if math.isnan(r.p_holm) else f"{r.p_holm:.4f}", f"{r.tolerance:g}", r.verdict,
            ])
        widths = [max(len(x[i]) for x in lines) for i in range(len(header))]
        out = ["  ".join(v.ljust(w) for v, w in zip(line, widths)) for line in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out)


def metric_meaning(name: str) -> str | None:
    """What a larger value of metric ``name`` means, from the metric registry (e.g. 'more redundant')."""
    try:
        from ..metrics import METRICS

        return str(getattr(METRICS.get(name), "higher", "")) or None
    except (ImportError, UserError):
        return None


def parse_checks(specs: list[str] | None, available: set[str], tolerance: float) -> list[Check]:
    """`--metrics` entries -> checks. Default: every judge criterion and overall present."""
    if not specs:
        judge = measure_order(m for m in available if m.split(".")[0] in ("agent", "group"))
        if not judge:
            raise UserError("the runs have no judge scores in common; judge them (`--judges`) or name metrics with --metrics")
        return [Check(m, True, tolerance) for m in judge]
    checks = []
    for spec in specs:
        m = SPEC_RE.match(spec.strip())
        if not m:
            raise UserError(f"--metrics {spec!r}: expected MEASURE[:higher|lower][=TOLERANCE]")
        name = m.group("measure")
        if name not in available:
            matches = sorted(a for a in available if a.split(".", 1)[-1] == name)
            if not matches:
                raise UserError(f"--metrics {name!r}: not in both runs{did_you_mean(name, available)}; available: {', '.join(sorted(available))}")
        else:
            matches = [name]
        tol = float(m.group("tol")) if m.group("tol") else tolerance
        for measure in matches:
            if m.group("dir"):
                hib = m.group("dir") == "higher"
            elif measure.split(".")[0] in ("agent", "group"):
                hib = True
            else:
                meaning = metric_meaning(measure.split(".", 1)[1])
                said = f" (a higher value means '{meaning}')" if meaning else ""
                raise UserError(f"--metrics {measure}: say whether higher is better{said}; {LOWER_IS_BETTER_HINT}")
            checks.append(Check(measure, hib, tol))
    return checks


def _one_system(data: RunData, system: str | None, what: str) -> str:
    labels = sorted(set(data.units["label"])) if not data.units.empty else []
    if not labels:
        raise UserError(f"{what}: no judgments or metrics to compare; run `mascot-eval run` (with --judges) first")
    if system is not None:
        if system not in labels:
            raise UserError(f"{what}: system {system!r} not found{did_you_mean(system, labels)}; has {', '.join(labels)}")
        return system
    if len(labels) > 1:
        raise UserError(f"{what}: holds several systems ({', '.join(labels)}); choose one with --system / --baseline-system")
    return labels[0]


def _tasks(data: RunData, label: str) -> set[str]:
    return set(data.units[data.units["label"] == label]["task"])


def _verdict(row: RegressRow, alpha: float) -> str:
    worse = -row.change if row.higher_is_better else row.change
    real = not math.isnan(row.p_holm) and row.p_holm < alpha
    if worse > row.tolerance and real:
        return "FAIL"
    if worse > row.tolerance:
        return "drop (not significant)"
    if -worse > row.tolerance and real:
        return "improved"
    return "ok"


def regress(baseline: str | Path, candidate: str | Path, *, tolerance: float = 2.0, metrics: list[str] | None = None,
            alpha: float = 0.05, test: str = "wilcoxon", system: str | None = None, baseline_system: str | None = None,
            n_boot: int = 2000, seed: int = 0) -> RegressResult:
    cand_data = load_runs([candidate])
    cand_sys = _one_system(cand_data, system, f"candidate {candidate}")
    cu = cand_data.units[cand_data.units["label"] == cand_sys]
    cdv = dialogue_values(cu, ALL_JUDGES)
    base_path = Path(baseline)
    if base_path.is_file() and base_path.suffix == ".csv":
        return _regress_csv(base_path, cand_sys, cdv, cu, baseline_system, tolerance, metrics, alpha, test, n_boot, seed, str(candidate))
    bd = load_runs([RunDir(base_path)])
    base_sys = _one_system(bd, baseline_system or (cand_sys if cand_sys in set(bd.units["label"]) else None), f"baseline {baseline}")
    bu = bd.units[bd.units["label"] == base_sys]
    bt, ct = _tasks(bd, base_sys), set(cu["task"])
    if bt != ct:
        raise UserError(f"baseline tasks {sorted(bt)} differ from candidate tasks {sorted(ct)}; evaluate both on the same tasks")
    bdv = dialogue_values(bu, ALL_JUDGES)
    checks = parse_checks(metrics, set(bdv["measure"]) & set(cdv["measure"]), tolerance)
    rows = []
    for split in sorted(set(cdv["split"])):
        for chk in checks:
            b = bdv[(bdv["measure"] == chk.measure) & (bdv["split"] == split)].set_index("pair_key")
            c = cdv[(cdv["measure"] == chk.measure) & (cdv["split"] == split)].set_index("pair_key")
            shared = b.index.intersection(c.index)
            if len(shared) == 0:
                raise UserError(f"{chk.measure} ({split}): baseline and candidate share no contexts; rerun both with the same task sample")
            d = c.loc[shared, "value"].to_numpy(float) - b.loc[shared, "value"].to_numpy(float)
            rows.append(_row(split, chk, float(b.loc[shared, "value"].mean()), float(c.loc[shared, "value"].mean()), d,
                             c.loc[shared, "cluster"].tolist(), test, n_boot, seed))
    return _finish(rows, "paired", test, alpha, str(baseline), str(candidate), [])


def _row(split: str, chk: Check, base_mean: float, cand_mean: float, d: np.ndarray, clusters: list, test: str,
         n_boot: int, seed: int) -> RegressRow:
    est = bootstrap_mean(d, clusters, n_boot=n_boot, seed=seed)
    p = wilcoxon_signed_rank(d).p if test == "wilcoxon" else paired_permutation_test(d, seed=seed).p
    return RegressRow(split, chk.measure, base_mean, cand_mean, cand_mean - base_mean, est.lo, est.hi, int(d.size), p,
                      tolerance=chk.tolerance, higher_is_better=chk.higher_is_better)


def _finish(rows: list[RegressRow], mode: str, test: str, alpha: float, baseline: str, candidate: str,
            notes: list[str]) -> RegressResult:
    for r, ph in zip(rows, holm([r.p for r in rows])):
        r.p_holm = ph
        r.verdict = _verdict(r, alpha)
    return RegressResult(rows, mode, test, alpha, baseline, candidate, notes)


def _regress_csv(path: Path, cand_sys: str, cdv: pd.DataFrame, cu: pd.DataFrame, baseline_system: str | None,
                 tolerance: float, metrics: list[str] | None, alpha: float, test: str, n_boot: int, seed: int,
                 candidate: str) -> RegressResult:
    try:
        lb = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable CSV ({exc}); pass a run directory or a `mascot-eval leaderboard --out` CSV") from None
    need = {"system", "split", "tasks"}
    if not need <= set(lb.columns):
        raise UserError(f"{path}: columns {sorted(need - set(lb.columns))} missing; pass a `mascot-eval leaderboard --out` CSV")
    want = baseline_system or cand_sys
    systems = sorted(set(lb["system"].astype(str)))
    if want not in systems:
        if baseline_system is None and len(systems) == 1:
            want = systems[0]
        else:
            raise UserError(f"{path}: no row for system {want!r}{did_you_mean(want, systems)}; pick one with --baseline-system ({', '.join(systems)})")
    lb = lb[lb["system"].astype(str) == want]
    measures_csv = {c for c in lb.columns if c.split(".")[0] in ("agent", "group", "metric") and c.count(".") == 1}
    checks = parse_checks(metrics, measures_csv & set(cdv["measure"]), tolerance)
    rows = []
    for split in sorted(set(cdv["split"])):
        brow = lb[lb["split"] == split]
        if brow.empty:
            raise UserError(f"{path}: no {want!r} row for split {split!r}; the baseline was evaluated on other tasks")
        brow = brow.iloc[0]
        bt = set(str(brow["tasks"]).split(";"))
        ct = set(cu[cu["split"] == split]["task"])
        if bt != ct:
            raise UserError(f"baseline tasks {sorted(bt)} differ from candidate tasks {sorted(ct)}; evaluate both on the same tasks")
        for chk in checks:
            base_mean = brow.get(chk.measure)
            if base_mean is None or pd.isna(base_mean):
                raise UserError(f"{path}: {chk.measure} is empty for {want!r} ({split}); choose other --metrics")
            c = cdv[(cdv["measure"] == chk.measure) & (cdv["split"] == split)]
            d = c["value"].to_numpy(float) - float(base_mean)
            rows.append(_row(split, chk, float(base_mean), float(c["value"].mean()), d, c["cluster"].tolist(), test, n_boot, seed))
    notes = ["baseline is a leaderboard CSV: one-sample test of the candidate's dialogues against the baseline mean "
             "(the baseline's own sampling error is not included)"]
    return _finish(rows, "one-sample", test, alpha, str(path), candidate, notes)
