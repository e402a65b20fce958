"""CI regression gate: is a candidate run non-inferior to a baseline, measure by measure?

Every checked measure gets a margin m (the drop the gate tolerates, in the measure's units) and a
verdict from confidence bounds on the paired difference d = candidate - baseline over the units both
runs share (one value per dialogue; clustered by context), see :mod:`mascot_eval.stats.noninferiority`:
PASS when the lower bound is above -m, FAIL when the upper bound is below -m, INCONCLUSIVE otherwise.
The K bounds of a gate are each one-sided at alpha / K (Bonferroni), so the family-wise chance of a
wrong FAIL (or a wrong PASS) is at most alpha. Every row states its power: the minimum detectable
drop at its n (:mod:`mascot_eval.stats.power`) and the per-context standard deviation of d.

Before any number, the runs must be comparable: same tasks (versions and content hashes), contexts,
judge levels, judges (model, spec hash covering the rubric files, template hash), rubric files and
user-simulator settings (:func:`compare_runs`). A difference is one line per field naming both values,
exit 2, unless ``allow`` names the field (then it is printed with the verdict).

A leaderboard CSV as the baseline has no per-context values: the comparison is then *unpaired*, and
the baseline's own sampling error is taken from its 95% interval (normal approximation); only tasks
and judge names can be checked.

:func:`plan` turns a pilot run's paired variance into the number of contexts (and judge calls per
unit) a gate needs for its margins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import UserError, did_you_mean
from ..fileio import stable_hash
from ..stats.compare import dialogue_values
from ..stats.noninferiority import (
    FAIL,
    INCONCLUSIVE,
    GateBound,
    bonferroni,
    cluster_bootstrap_se,
    decide,
    gate_bound,
    min_contexts,
    t_crit,
)
from ..stats.power import contexts_needed, contexts_to_decide, judge_split, mdd, sd_upper
from .rundir import RunDir
from .tables import ALL_JUDGES, RunData, load_runs, measure_order

SPEC_RE = re.compile(r"^(?P<measure>[A-Za-z0-9_.\-]+?)(?::(?P<dir>higher|lower))?(?:=(?P<margin>[0-9.]+))?$")
LOWER_IS_BETTER_HINT = "append ':lower' or ':higher' (e.g. metric.inter_agent_selfbleu:lower=0.02)"
FIELDS = (
    "tasks",
    "task_version",
    "task_hash",
    "contexts",
    "levels",
    "judges",
    "judge_model",
    "judge_spec",
    "judge_template",
    "rubric",
    "user_sim",
)
Z95 = 1.959963984540054


@dataclass
class Check:
    measure: str
    higher_is_better: bool
    margin: float


@dataclass
class GateRow:
    split: str
    measure: str
    higher_is_better: bool
    margin: float
    baseline: float
    candidate: float
    change: float  # candidate - baseline, in the measure's units
    change_lo: float  # one-sided bounds of the change (each at 1 - alpha_each)
    change_hi: float
    n: int  # contexts
    n_obs: int  # units (dialogues)
    sd: float  # per-context standard deviation of the paired difference
    mdd: float  # minimum detectable drop at this n
    alpha_each: float
    verdict: str = ""
    reason: str = ""
    need: int | None = None  # contexts that would decide an INCONCLUSIVE row

    @property
    def underpowered(self) -> bool:
        return not self.mdd <= self.margin


@dataclass
class Mismatch:
    field: str
    baseline: str
    candidate: str
    detail: str = ""  # e.g. the judge or task the field belongs to

    def line(self) -> str:
        what = f"{self.field} ({self.detail})" if self.detail else self.field
        return f"{what}: baseline {self.baseline}, candidate {self.candidate}"


@dataclass
class RegressResult:
    rows: list[GateRow]
    mode: str  # "paired" | "unpaired (leaderboard CSV)"
    alpha: float
    power: float
    fail_on: str
    baseline: str
    candidate: str
    systems: tuple[str, str]  # (baseline system, candidate system)
    n_boot: int
    allowed: list[Mismatch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def k(self) -> int:
        return len(self.rows)

    @property
    def alpha_each(self) -> float:
        return bonferroni(self.alpha, self.k)

    @property
    def failed(self) -> bool:
        return any(r.verdict == FAIL for r in self.rows)

    @property
    def inconclusive(self) -> bool:
        return any(r.verdict == INCONCLUSIVE for r in self.rows)

    def exit_code(self, inconclusive: str | None = None) -> int:
        """0 every measure PASSes, 1 any FAILs, 3 any is INCONCLUSIVE (``inconclusive`` = pass/fail maps it)."""
        if self.failed:
            return 1
        if self.inconclusive:
            return {None: 3, "pass": 0, "fail": 1}[inconclusive]
        return 0

    def first_line(self) -> str:
        weak = [r for r in self.rows if r.underpowered]
        if weak:
            shown = ", ".join(
                f"{r.measure} ({r.split}) MDD {_fmt(r.mdd, r.measure)} > margin {r.margin:g} at n={r.n}" for r in weak[:4]
            )
            more = f" and {len(weak) - 4} more" if len(weak) > 4 else ""
            return (
                f"UNDERPOWERED: {len(weak)} of {self.k} measure(s) cannot resolve their margin at this n "
                f"(minimum detectable drop > margin at {self.power:.0%} power): {shown}{more}; "
                "see `mascot-eval plan` for the contexts needed"
            )
        ns = sorted({r.n for r in self.rows})
        return (
            f"power: every measure resolves its margin (minimum detectable drop <= margin at {self.power:.0%} power; "
            f"n = {ns[0] if len(ns) == 1 else f'{ns[0]}-{ns[-1]}'} contexts)"
        )

    def header(self) -> list[str]:
        b_sys, c_sys = self.systems
        lines = [
            f"baseline: {self.baseline} (system {b_sys})",
            f"candidate: {self.candidate} (system {c_sys})",
            f"design: {self.mode}; d = candidate - baseline per dialogue, clustered by context",
            f"bounds: one-sided at 1 - {self.alpha:g}/{self.k} = {1 - self.alpha_each:.4g} each (Bonferroni over {self.k} "
            f"measure(s): family-wise error <= {self.alpha:g}); t(n-1) x cluster-bootstrap standard error "
            f"({self.n_boot} replicates over contexts); PASS: lower bound > -margin, FAIL: upper bound < -margin"
            + (" or point drop > margin" if self.fail_on == "point" else "")
            + ", else INCONCLUSIVE",
        ]
        lines += [f"allowed mismatch: {m.line()}" for m in self.allowed]
        lines += [f"note: {n}" for n in self.notes]
        return lines

    def table(self) -> str:
        head = ["split", "measure", "baseline", "candidate", "change", "bounds", "margin", "n", "sd(d)", "MDD", "verdict", "need"]
        lines = [head]
        for r in self.rows:
            f = lambda v, sign=False, m=r.measure: _fmt(v, m, sign)
            thr = f"{'-' if r.higher_is_better else '+'}{r.margin:g}"
            lines.append(
                [
                    r.split,
                    r.measure + ("" if r.higher_is_better else " (lower=better)"),
                    f(r.baseline),
                    f(r.candidate),
                    f(r.change, True),
                    f"[{f(r.change_lo, True)}, {f(r.change_hi, True)}]",
                    thr,
                    str(r.n),
                    f(r.sd),
                    f(r.mdd),
                    r.verdict,
                    "" if r.need is None else str(r.need),
                ]
            )
        widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
        out = ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out)

    def verdict_line(self, inconclusive: str | None = None) -> str:
        code = self.exit_code(inconclusive)
        fails = [r for r in self.rows if r.verdict == FAIL]
        unsure = [r for r in self.rows if r.verdict == INCONCLUSIVE]
        if fails:
            what = "; ".join(f"{r.measure} ({r.split}) {_fmt(r.change, r.measure, True)}: {r.reason}" for r in fails)
            return f"VERDICT: FAIL (exit {code}): {len(fails)} measure(s) dropped by more than their margin: {what}"
        if unsure:
            what = "; ".join(
                f"{r.measure} ({r.split}): {r.reason}" + (f", ~{r.need} contexts would decide it" if r.need else "")
                for r in unsure
            )
            how = {3: "", 0: "; counted as a pass (--inconclusive pass)", 1: "; counted as a failure (--inconclusive fail)"}[code]
            return f"VERDICT: INCONCLUSIVE (exit {code}): {len(unsure)} measure(s) undecided{how}: {what}"
        return f"VERDICT: PASS (exit 0): every measure is non-inferior within its margin ({self.k} measure(s))"

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{**asdict(r)} for r in self.rows])


def _fmt(v: float | None, measure: str, sign: bool = False) -> str:
    if v is None or math.isnan(v):
        return "–"
    if math.isinf(v):
        return "+inf" if v > 0 and sign else ("inf" if v > 0 else "-inf")
    d = 1 if measure.split(".")[0] in ("agent", "group") else 3
    return f"{v:+.{d}f}" if sign else f"{v:.{d}f}"


# -- measures ------------------------------------------------------------------------------------


def metric_meaning(name: str) -> str | None:
    """What a larger value of metric ``name`` means, from the metric registry (e.g. 'more redundant')."""
    try:
        from ..metrics import METRICS

        return str(getattr(METRICS.get(name), "higher", "")) or None
    except (ImportError, UserError):
        return None


def parse_checks(specs: list[str] | None, available: set[str], margin: float) -> list[Check]:
    """`--metrics` entries -> checks. Default: every judge criterion and overall present in both runs.

    Judge measures (0-100 points) default to ``margin``; a metric must state its direction and its own
    margin in its units (``metric.inter_agent_selfbleu:lower=0.02``)."""
    if not specs:
        judge_measures = measure_order(m for m in available if m.split(".")[0] in ("agent", "group"))
        if not judge_measures:
            raise UserError("the runs have no judge scores in common; judge them (`--judges`) or name metrics with --metrics")
        return [Check(m, True, margin) for m in judge_measures]
    checks = []
    for spec in specs:
        m = SPEC_RE.match(spec.strip())
        if not m:
            raise UserError(f"--metrics {spec!r}: expected MEASURE[:higher|lower][=MARGIN]")
        name = m.group("measure")
        if name not in available:
            matches = sorted(a for a in available if a.split(".", 1)[-1] == name)
            if not matches:
                raise UserError(
                    f"--metrics {name!r}: not in both runs{did_you_mean(name, available)}; "
                    f"available: {', '.join(sorted(available)) or 'none'}"
                )
        else:
            matches = [name]
        for measure in matches:
            judge = measure.split(".")[0] in ("agent", "group")
            if m.group("dir"):
                hib = m.group("dir") == "higher"
            elif judge:
                hib = True
            else:
                meaning = metric_meaning(measure.split(".", 1)[1])
                said = f" (a higher value means '{meaning}')" if meaning else ""
                raise UserError(f"--metrics {measure}: say whether higher is better{said}; {LOWER_IS_BETTER_HINT}")
            if m.group("margin"):
                mg = float(m.group("margin"))
            elif judge:
                mg = margin
            else:
                raise UserError(
                    f"--metrics {measure}: give its margin in the metric's own units, e.g. "
                    f"{measure}:{'higher' if hib else 'lower'}=0.02 (--margin is in judge points)"
                )
            checks.append(Check(measure, hib, mg))
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


# -- comparability -------------------------------------------------------------------------------


def _manifest(data: RunData) -> dict[str, Any]:
    return next(iter(data.manifests.values()), {}) or {}


def _show(v: Any) -> str:
    if v is None:
        return "(not recorded)"
    if isinstance(v, (list, tuple, set, frozenset)):
        return "[" + ", ".join(str(x) for x in sorted(v, key=str)) + "]" if v else "[]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_show(x)}" for k, x in sorted(v.items())) + "}"
    return str(v)


def run_profile(data: RunData, system: str) -> dict[str, Any]:
    """What must match between a baseline and a candidate, as recorded in manifest, transcripts and
    judgment rows of one system: {field: value} and {(field, detail): value}."""
    m = _manifest(data)
    ts = [t for _, t in data.transcripts if t.system == system]
    js = [r for r in data.judgments if r.get("system") == system]
    units = data.units[data.units["system"] == system] if not data.units.empty else data.units
    tasks = sorted({t.task for t in ts} | set(units["task"] if not units.empty else []))
    p: dict[Any, Any] = {"tasks": tuple(tasks)}
    mt = m.get("tasks") or {}
    for task in tasks:
        versions = sorted({str(t.task_version) for t in ts if t.task == task}) or (
            [str(mt[task]["version"])] if task in mt and mt[task].get("version") is not None else []
        )
        p[("task_version", task)] = tuple(versions) if versions else None
        p[("task_hash", task)] = (mt.get(task) or {}).get("content_hash")
    p["contexts"] = frozenset(t.pair_key for t in ts) if ts else frozenset(units["pair_key"]) if not units.empty else frozenset()
    p["levels"] = tuple(sorted({str(r.get("level")) for r in js}))
    judges = sorted({str(r.get("judge")) for r in js})
    p["judges"] = tuple(judges)
    mj = m.get("judges") or {}
    for j in judges:
        rows = [r for r in js if str(r.get("judge")) == j]
        p[("judge_model", j)] = tuple(sorted({str(r.get("judge_model")) for r in rows}))
        p[("judge_spec", j)] = tuple(sorted({str(r.get("spec_hash")) for r in rows}))
        p[("judge_template", j)] = tuple(sorted({str(r.get("template_hash")) for r in rows}))
        p[("rubric", j)] = (mj.get(j) or {}).get("rubrics")
    sims = {tuple((k, str(v)) for k, v in sorted(((t.stats or {}).get("user_sim") or {}).items())) for t in ts}
    p["user_sim"] = tuple(sorted(" ".join(f"{k}={v}" for k, v in s) if s else "(not recorded)" for s in sims))
    return p


def _contexts_line(b: frozenset, c: frozenset) -> tuple[str, str]:
    only_b, only_c = sorted(b - c), sorted(c - b)
    eg = lambda xs: f", e.g. {', '.join(xs[:2])}" if xs else ""  # noqa: E731
    return (
        f"{len(b)} dialogues ({len(only_b)} not in candidate{eg(only_b)})",
        f"{len(c)} dialogues ({len(only_c)} not in baseline{eg(only_c)})",
    )


def compare_runs(base: dict[Any, Any], cand: dict[Any, Any]) -> list[Mismatch]:
    """Every field that differs between two :func:`run_profile` results, one Mismatch each."""
    out: list[Mismatch] = []
    for key in sorted(set(base) | set(cand), key=lambda k: (FIELDS.index(k if isinstance(k, str) else k[0]), str(k))):
        name, detail = (key, "") if isinstance(key, str) else key
        if detail and (key not in base or key not in cand):
            continue  # a task or judge only one side has: reported as tasks / judges
        b, c = base.get(key), cand.get(key)
        if b == c:
            continue
        if name == "contexts":
            bs, cs = _contexts_line(b or frozenset(), c or frozenset())
            out.append(Mismatch(name, bs, cs))
        else:
            out.append(Mismatch(name, _show(b), _show(c), detail))
    return out


def _check_allowed(allow: Iterable[str]) -> set[str]:
    allowed = set()
    for a in allow:
        if a not in FIELDS:
            raise UserError(f"--allow-mismatch {a!r}: not a field{did_you_mean(a, FIELDS)}; fields: {', '.join(FIELDS)}")
        allowed.add(a)
    return allowed


def _refuse(mismatches: list[Mismatch]) -> None:
    lines = [f"not comparable: {m.line()}; pass --allow-mismatch {m.field} to compare anyway" for m in mismatches]
    raise UserError("\n".join(lines))


def _opener_note(bd: RunData, b_sys: str, cd: RunData, c_sys: str, keys: set[str]) -> str | None:
    def openers(data: RunData, system: str) -> dict[str, str]:
        out = {}
        for _, t in data.transcripts:
            if t.system == system and t.pair_key in keys and t.turns and t.turns[0].is_user:
                out[t.pair_key] = t.turns[0].text
        return out

    b, c = openers(bd, b_sys), openers(cd, c_sys)
    shared = set(b) & set(c)
    if not shared:
        return None
    same = sum(1 for k in shared if b[k] == c[k])
    if same == len(shared):
        return f"user openers identical on all {len(shared)} shared dialogues"
    return (
        f"user openers differ on {len(shared) - same} of {len(shared)} shared dialogues (other run seeds, or a "
        "non-deterministic user model without the response cache): the pairing is weaker, the bounds stay valid"
    )


# -- the gate ------------------------------------------------------------------------------------


@dataclass
class _Item:
    split: str
    check: Check
    base_mean: float
    cand_mean: float
    d: np.ndarray  # oriented differences (positive = better)
    clusters: list
    base_se: float | None = None  # unpaired (CSV) mode: the baseline mean's standard error
    base_n: int | None = None


def _row_seed(seed: int, split: str, measure: str) -> int:
    return int(stable_hash([seed, split, measure], 8), 16)


def _finish(items: list[_Item], *, alpha: float, power: float, fail_on: str, n_boot: int, seed: int) -> list[GateRow]:
    a = bonferroni(alpha, len(items))
    rows = []
    for it in items:
        s = 1.0 if it.check.higher_is_better else -1.0
        if it.base_se is None:
            b = gate_bound(it.d, it.clusters, alpha=a, n_boot=n_boot, seed=_row_seed(seed, it.split, it.check.measure))
        else:
            b = _unpaired_bound(it, a, n_boot, seed)
        verdict, reason = decide(b, it.check.margin, fail_on=fail_on)
        lo, hi = (b.lo, b.hi) if s > 0 else (-b.hi, -b.lo)
        need = None
        if verdict == INCONCLUSIVE and it.base_se is None:
            need = contexts_to_decide(b.diff, b.sd, it.check.margin, a, power)
            if need is None and b.n < min_contexts(a):
                need = min_contexts(a)
        rows.append(
            GateRow(
                split=it.split,
                measure=it.check.measure,
                higher_is_better=it.check.higher_is_better,
                margin=it.check.margin,
                baseline=it.base_mean,
                candidate=it.cand_mean,
                change=it.cand_mean - it.base_mean,
                change_lo=lo,
                change_hi=hi,
                n=b.n,
                n_obs=b.n_obs,
                sd=b.sd,
                mdd=mdd(b.sd, b.n, a, power),
                alpha_each=a,
                verdict=verdict,
                reason=reason,
                need=need,
            )
        )
    return rows


def _unpaired_bound(it: _Item, a: float, n_boot: int, seed: int) -> GateBound:
    """Candidate mean (cluster bootstrap SE) minus a published baseline mean (SE from its interval)."""
    s = 1.0 if it.check.higher_is_better else -1.0
    cand = s * np.asarray(it.d, dtype=float)  # raw candidate values (d = s * (value - base_mean))
    mean_c, se_c, n_c = cluster_bootstrap_se(cand, it.clusters, n_boot=n_boot, seed=_row_seed(seed, it.split, it.check.measure))
    n = min(n_c, it.base_n or n_c)
    if n < 2 or not math.isfinite(se_c):
        return GateBound(float(np.mean(it.d)), -math.inf, math.inf, float("nan"), float("nan"), n, len(cand), a, math.inf)
    assert it.base_se is not None  # _finish calls this in unpaired mode only (base_se set)
    se = math.sqrt((se_c * math.sqrt(n_c / (n_c - 1))) ** 2 + float(it.base_se) ** 2)
    diff = float(np.mean(it.d))
    crit = t_crit(a, n)
    return GateBound(diff, diff - crit * se, diff + crit * se, se, se * math.sqrt(n), n, len(cand), a, crit)


def _splits(dv: pd.DataFrame) -> list[str]:
    return sorted(set(dv["split"]))


def regress(
    baseline: str | Path,
    candidate: str | Path,
    *,
    margin: float = 2.0,
    metrics: list[str] | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    fail_on: str = "bound",
    system: str | None = None,
    baseline_system: str | None = None,
    allow: Iterable[str] = (),
    n_boot: int = 2000,
    seed: int = 0,
) -> RegressResult:
    allowed_fields = _check_allowed(allow)
    cand_data = load_runs([candidate])
    cand_sys = _one_system(cand_data, system, f"candidate {candidate}")
    cu = cand_data.units[cand_data.units["label"] == cand_sys]
    cdv = dialogue_values(cu, ALL_JUDGES)
    base_path = Path(baseline)
    if base_path.is_file() and base_path.suffix == ".csv":
        return _regress_csv(
            base_path,
            cand_data,
            cand_sys,
            cdv,
            cu,
            baseline_system,
            margin,
            metrics,
            alpha,
            power,
            fail_on,
            allowed_fields,
            n_boot,
            seed,
            str(candidate),
        )
    bd = load_runs([RunDir(base_path)])
    base_sys = _one_system(
        bd, baseline_system or (cand_sys if cand_sys in set(bd.units["label"]) else None), f"baseline {baseline}"
    )
    bu = bd.units[bd.units["label"] == base_sys]
    mismatches = compare_runs(run_profile(bd, base_sys), run_profile(cand_data, cand_sys))
    refused = [m for m in mismatches if m.field not in allowed_fields]
    if refused:
        _refuse(refused)
    bdv = dialogue_values(bu, ALL_JUDGES)
    checks = parse_checks(metrics, set(bdv["measure"]) & set(cdv["measure"]), margin)
    items = []
    keys: set[str] = set()
    for split in _splits(cdv):
        for chk in checks:
            b = bdv[(bdv["measure"] == chk.measure) & (bdv["split"] == split)].set_index("pair_key")
            c = cdv[(cdv["measure"] == chk.measure) & (cdv["split"] == split)].set_index("pair_key")
            shared = b.index.intersection(c.index)
            if len(shared) == 0:
                raise UserError(
                    f"{chk.measure} ({split}): baseline and candidate share no scored dialogues; "
                    "rerun both with the same task sample"
                )
            keys |= set(shared)
            s = 1.0 if chk.higher_is_better else -1.0
            bv, cv = b.loc[shared, "value"].to_numpy(float), c.loc[shared, "value"].to_numpy(float)
            items.append(_Item(split, chk, float(bv.mean()), float(cv.mean()), s * (cv - bv), c.loc[shared, "cluster"].tolist()))
    rows = _finish(items, alpha=alpha, power=power, fail_on=fail_on, n_boot=n_boot, seed=seed)
    notes = []
    on = _opener_note(bd, base_sys, cand_data, cand_sys, keys)
    if on:
        notes.append(on)
    bs, cs = (_manifest(bd).get("seeds") or {}).get("generate"), (_manifest(cand_data).get("seeds") or {}).get("generate")
    if bs != cs:
        notes.append(f"run seeds differ (baseline {bs}, candidate {cs}): sampled user turns are not shared")
    per_split: dict[str, int] = {}
    for it in items:
        per_split[it.split] = max(per_split.get(it.split, 0), len(it.d))
    short = [r for r in rows if r.n_obs < per_split[r.split]]
    if short:
        notes.append(
            f"{len(short)} measure(s) have fewer scored dialogues than the runs share (unscored judge outputs are left out)"
        )
    return RegressResult(
        rows,
        "paired",
        alpha,
        power,
        fail_on,
        str(baseline),
        str(candidate),
        (base_sys, cand_sys),
        n_boot,
        allowed=[m for m in mismatches if m.field in allowed_fields],
        notes=notes,
    )


def _regress_csv(
    path: Path,
    cand_data: RunData,
    cand_sys: str,
    cdv: pd.DataFrame,
    cu: pd.DataFrame,
    baseline_system: str | None,
    margin: float,
    metrics: list[str] | None,
    alpha: float,
    power: float,
    fail_on: str,
    allowed_fields: set[str],
    n_boot: int,
    seed: int,
    candidate: str,
) -> RegressResult:
    try:
        lb = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{path}: not a readable CSV ({exc}); pass a run directory or a `mascot-eval leaderboard --out` CSV"
        ) from None
    need = {"system", "split", "tasks"}
    if not need <= set(lb.columns):
        raise UserError(f"{path}: columns {sorted(need - set(lb.columns))} missing; pass a `mascot-eval leaderboard --out` CSV")
    want = baseline_system or cand_sys
    systems = sorted(set(lb["system"].astype(str)))
    if want not in systems:
        if baseline_system is None and len(systems) == 1:
            want = systems[0]
        else:
            raise UserError(
                f"{path}: no row for system {want!r}{did_you_mean(want, systems)}; pick one with --baseline-system ({', '.join(systems)})"
            )
    lb = lb[lb["system"].astype(str) == want]
    measures_csv = {c for c in lb.columns if c.split(".")[0] in ("agent", "group", "metric") and c.count(".") == 1}
    checks = parse_checks(metrics, measures_csv & set(cdv["measure"]), margin)
    cand_judges = tuple(sorted({str(r.get("judge")) for r in cand_data.judgments if r.get("system") == cand_sys}))
    mismatches: list[Mismatch] = []
    items = []
    for split in _splits(cdv):
        brow = lb[lb["split"] == split]
        if brow.empty:
            raise UserError(f"{path}: no {want!r} row for split {split!r}; the baseline was evaluated on other tasks")
        brow = brow.iloc[0]
        bt = tuple(sorted(x for x in str(brow["tasks"]).split(";") if x))
        ct = tuple(sorted(set(cu[cu["split"] == split]["task"])))
        if bt != ct:
            mismatches.append(Mismatch("tasks", _show(bt), _show(ct), split))
        if "judges" in lb.columns and not pd.isna(brow["judges"]):
            bj = tuple(sorted(x for x in str(brow["judges"]).split(";") if x))
            if cand_judges and bj != cand_judges:
                mismatches.append(Mismatch("judges", _show(bj), _show(cand_judges), split))
        for chk in checks:
            base_mean = brow.get(chk.measure)
            lo, hi, bn = brow.get(f"{chk.measure}.lo"), brow.get(f"{chk.measure}.hi"), brow.get(f"{chk.measure}.n")
            if base_mean is None or pd.isna(base_mean):
                raise UserError(f"{path}: {chk.measure} is empty for {want!r} ({split}); choose other --metrics")
            if lo is None or hi is None or pd.isna(lo) or pd.isna(hi) or bn is None or pd.isna(bn):
                raise UserError(
                    f"{path}: {chk.measure} has no interval (.lo/.hi/.n) for {want!r} ({split}), so its "
                    "sampling error is unknown; regenerate it with `mascot-eval leaderboard --out`"
                )
            c = cdv[(cdv["measure"] == chk.measure) & (cdv["split"] == split)]
            s = 1.0 if chk.higher_is_better else -1.0
            v = c["value"].to_numpy(float)
            items.append(
                _Item(
                    split,
                    chk,
                    float(base_mean),
                    float(v.mean()),
                    s * (v - float(base_mean)),
                    c["cluster"].tolist(),
                    base_se=(float(hi) - float(lo)) / (2 * Z95),
                    base_n=int(bn),
                )
            )
    refused = [m for m in mismatches if m.field not in allowed_fields]
    if refused:
        _refuse(refused)
    rows = _finish(items, alpha=alpha, power=power, fail_on=fail_on, n_boot=n_boot, seed=seed)
    notes = [
        "baseline is a leaderboard CSV: unpaired comparison of the candidate's dialogues with the baseline's mean; "
        "the baseline's own sampling error is taken from its 95% interval (normal approximation), so nothing is "
        "gained from pairing; a baseline run directory gives a paired, tighter gate",
        "a leaderboard CSV records no task versions, contexts, judge hashes, rubrics or user-simulator settings: "
        "only tasks and judge names were checked",
    ]
    return RegressResult(
        rows,
        "unpaired (leaderboard CSV)",
        alpha,
        power,
        fail_on,
        str(path),
        candidate,
        (want, cand_sys),
        n_boot,
        allowed=[m for m in mismatches if m.field in allowed_fields],
        notes=notes,
    )


# -- planning ------------------------------------------------------------------------------------


@dataclass
class PlanRow:
    split: str
    measure: str
    margin: float
    pilot_n: int
    sd: float  # per-context standard deviation of the paired difference (with the pilot's judge calls)
    pilot_mdd: float
    needed: int | None  # contexts for MDD <= margin with the planned sd (the pilot sd's upper bound)
    judge_calls: int  # judge calls per unit in the pilot
    sd_plan: float = math.nan  # the upper confidence bound of sd at the plan's assurance: what n is sized on
    needed_point: int | None = None  # contexts for MDD <= margin on the point estimate of sd (for comparison)
    sd_by_calls: dict[int, float] = field(default_factory=dict)  # judge calls per unit -> sd (when separable)
    needed_by_calls: dict[int, int | None] = field(default_factory=dict)


@dataclass
class PlanResult:
    rows: list[PlanRow]
    alpha: float
    power: float
    design: str
    notes: list[str] = field(default_factory=list)
    assurance: float = 0.8

    @property
    def alpha_each(self) -> float:
        return bonferroni(self.alpha, len(self.rows))

    @property
    def needed(self) -> int | None:
        ns = [r.needed for r in self.rows]
        known = [n for n in ns if n is not None]
        return None if len(known) < len(ns) else max(known)


def _paired_values(bu: pd.DataFrame, cu: pd.DataFrame, checks: list[Check], judge: str) -> dict[tuple[str, str], pd.DataFrame]:
    """(split, measure) -> frame of pair_key, cluster, d (oriented) on shared dialogues, for one judge."""
    bdv, cdv = dialogue_values(bu, judge), dialogue_values(cu, judge)
    out = {}
    for split in sorted(set(cdv["split"]) & set(bdv["split"])):
        for chk in checks:
            b = bdv[(bdv["measure"] == chk.measure) & (bdv["split"] == split)].set_index("pair_key")
            c = cdv[(cdv["measure"] == chk.measure) & (cdv["split"] == split)].set_index("pair_key")
            shared = b.index.intersection(c.index)
            s = 1.0 if chk.higher_is_better else -1.0
            out[(split, chk.measure)] = pd.DataFrame(
                {
                    "pair_key": shared,
                    "cluster": c.loc[shared, "cluster"].to_numpy(),
                    "d": s * (c.loc[shared, "value"].to_numpy(float) - b.loc[shared, "value"].to_numpy(float)),
                }
            )
    return out


def plan(
    pilot: str | Path,
    *,
    baseline: str | Path | None = None,
    margin: float = 2.0,
    metrics: list[str] | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    system: str | None = None,
    baseline_system: str | None = None,
    judge_calls: Iterable[int] = (1, 2, 3),
    n_boot: int = 2000,
    seed: int = 0,
    assurance: float = 0.8,
) -> PlanResult:
    """Contexts a gate needs so that its minimum detectable drop is at most each measure's margin,
    from a pilot's paired variance: two runs (``pilot`` as candidate, ``baseline``), or two systems of
    one run, or one system (no pairing: sd of the difference taken as sqrt(2) x the sd of the values).
    Sized on the pilot sd's one-sided upper bound at ``assurance`` (:func:`~mascot_eval.stats.power.sd_upper`),
    so that a gate of the planned size reaches its MDD with about that probability."""
    pd_ = load_runs([pilot])
    notes: list[str] = []
    if baseline is not None:
        bd = load_runs([RunDir(Path(baseline))])
        c_sys = _one_system(pd_, system, f"pilot {pilot}")
        b_sys = _one_system(bd, baseline_system or (c_sys if c_sys in set(bd.units["label"]) else None), f"baseline {baseline}")
        bu, cu = bd.units[bd.units["label"] == b_sys], pd_.units[pd_.units["label"] == c_sys]
        design = f"paired: {c_sys} in {pilot} vs {b_sys} in {baseline}"
        notes += [
            f"not comparable as a gate would need (regress refuses it): {m.line()}"
            for m in compare_runs(run_profile(bd, b_sys), run_profile(pd_, c_sys))
        ]
    else:
        labels = sorted(set(pd_.units["label"])) if not pd_.units.empty else []
        if not labels:
            raise UserError(f"pilot {pilot}: no judgments or metrics; run `mascot-eval run` (with --judges) first")
        if len(labels) == 1:
            c_sys = _one_system(pd_, system, f"pilot {pilot}")
            bu = cu = pd_.units[pd_.units["label"] == c_sys]
            design = f"one system ({c_sys}): unpaired"
            notes.append(
                "the pilot has one system, so the paired variance is unknown: sd(d) is taken as sqrt(2) x the sd "
                "of the per-context values (no pairing benefit; an upper estimate when the pairing correlation "
                "is >= 0). A pilot with two runs or two systems gives the real paired variance"
            )
        else:
            if len(labels) > 2 and (system is None or baseline_system is None):
                raise UserError(
                    f"pilot {pilot}: holds several systems ({', '.join(labels)}); choose the pair with "
                    "--system and --baseline-system"
                )
            for name in (system, baseline_system):
                if name is not None and name not in labels:
                    raise UserError(
                        f"pilot {pilot}: system {name!r} not found{did_you_mean(name, labels)}; has {', '.join(labels)}"
                    )
            c_sys = system or next(x for x in reversed(labels) if x != baseline_system)
            b_sys = baseline_system or next(x for x in labels if x != c_sys)
            if b_sys == c_sys:
                raise UserError(f"pilot {pilot}: --system and --baseline-system name the same system {c_sys!r}")
            bu, cu = pd_.units[pd_.units["label"] == b_sys], pd_.units[pd_.units["label"] == c_sys]
            design = f"paired: {c_sys} vs {b_sys} in {pilot}"
    paired = bu is not cu
    available = set(dialogue_values(bu, ALL_JUDGES)["measure"]) & set(dialogue_values(cu, ALL_JUDGES)["measure"])
    checks = parse_checks(metrics, available, margin)
    if paired:
        frames = _paired_values(bu, cu, checks, ALL_JUDGES)
    else:
        dv = dialogue_values(cu, ALL_JUDGES)
        frames = {}
        for split in sorted(set(dv["split"])):
            for chk in checks:
                g = dv[(dv["measure"] == chk.measure) & (dv["split"] == split)]
                frames[(split, chk.measure)] = pd.DataFrame(
                    {"pair_key": g["pair_key"], "cluster": g["cluster"], "d": math.sqrt(2) * g["value"].to_numpy(float)}
                )
    judges = sorted(set(cu["judge"]) - {ALL_JUDGES})
    per_judge = {j: _paired_values(bu, cu, checks, j) for j in judges} if paired and len(judges) >= 2 else {}
    if paired and len(judges) < 2:
        notes.append(
            "one judge call per unit in the pilot: judge noise cannot be told apart from the rest, so the "
            "plan is for the same judges; a pilot judged by two or more judges shows the gain from more calls"
        )
    a = bonferroni(alpha, len(frames))
    rows = []
    for (split, measure), f in frames.items():
        chk = next(c for c in checks if c.measure == measure)
        if f.empty:
            raise UserError(f"{measure} ({split}): no shared dialogues in the pilot; pick other --metrics")
        b = gate_bound(
            f["d"].to_numpy(float), f["cluster"].tolist(), alpha=a, n_boot=n_boot, seed=_row_seed(seed, split, measure)
        )
        sd_plan = sd_upper(b.sd, b.n, assurance)
        r = PlanRow(
            split,
            measure,
            chk.margin,
            b.n,
            b.sd,
            mdd(b.sd, b.n, a, power),
            contexts_needed(sd_plan, chk.margin, a, power),
            judge_calls=len(judges) if per_judge else 1,
            sd_plan=sd_plan,
            needed_point=contexts_needed(b.sd, chk.margin, a, power),
        )
        if per_judge:
            ctx_lists: dict[str, list[float]] = {}
            for j in judges:
                fj = per_judge[j].get((split, measure))
                if fj is None or fj.empty:
                    continue
                for cl, v in fj.groupby("cluster")["d"].mean().items():
                    ctx_lists.setdefault(cl, []).append(float(v))
            var_between, var_call, _ = judge_split(list(ctx_lists.values()))
            if math.isfinite(var_between) and math.isfinite(b.sd):
                # scale to the bootstrap's effective sd: var(J) = sd^2 - var_call / J_pilot + var_call / J
                base = b.sd**2 - var_call / r.judge_calls
                inflate = sd_plan / b.sd if b.sd > 0 and math.isfinite(sd_plan) else 1.0
                for jc in sorted(set(judge_calls) | {r.judge_calls}):
                    sdj = math.sqrt(max(base + var_call / jc, 0.0)) * inflate
                    r.sd_by_calls[jc] = sdj
                    r.needed_by_calls[jc] = contexts_needed(sdj, chk.margin, a, power)
        rows.append(r)
    n_min = min(r.pilot_n for r in rows) if rows else 0
    if n_min >= 2:
        notes.append(
            f"sd(d) is estimated from {n_min} pilot contexts (relative standard error about "
            f"{1 / math.sqrt(2 * (n_min - 1)):.0%}): the plan sizes on its {assurance:.0%} upper bound "
            f"(sd plan), so a gate of that size reaches MDD <= margin with about {assurance:.0%} probability; "
            "'on point sd' is the size that reaches it only about half the time"
        )
    return PlanResult(rows, alpha, power, design, notes, assurance)
