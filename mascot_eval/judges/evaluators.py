"""The evaluators table: how well each judge agrees with the people who rated the validation dialogues.

Per judge x value (``score``; ``weighted_score`` where the judge gives one) x set x criterion, over
the dialogues both the judge and the human scored: n; Spearman and Kendall (tau-b) correlation with
the human rating (scipy); Krippendorff's alpha, ordinal, judge vs human
(:func:`mascot_eval.judges.agreement.krippendorff_alpha`); exact agreement (the judge's value
rounded equals the rating) and agreement within one point; mean bias (judge - human); every one
with a 95% percentile-bootstrap interval over dialogues. Length bias: Spearman of the judge's value
with the words the judged side wrote, next to the same correlation for the human rating. Per
judge x set: unscored units and their reasons, price per 1,000 dialogues (tokens x
``judges/prices.yaml``, also for cached calls; blank for a model without a price), call-seconds per
1,000 dialogues (summed latency of calls not answered from the cache). Per judge: position bias
(pick-best triples shown in 3 rotations: first-position pick rate, 1/3 = none; share of picks that
name the dialogue with the highest human rating) and wall seconds per 1,000 dialogues. Steering:
per judge variant (guards as configured / ``+unguarded``) and probe, the susceptibility rate
(share of eligible dialogues - clean verdict scored and not already the target everywhere - whose
probed verdict gives every criterion the target), the mean score shift towards the target (of
``score``, and of ``weighted_score`` where the judge gives one), and how many probed verdicts the
guards left unscored.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from ..backends.prices import price_table
from ..fileio import atomic_write_json, atomic_write_text
from ..runs.rundir import RunDir
from ..stats.bootstrap import bootstrap_mean, bootstrap_statistic
from ..transcript import Transcript
from .agreement import krippendorff_alpha, spearman
from .prompts import reply_words
from .run import latest_judgments

SCHEMA = "mascot-evaluators/1"
NAN = float("nan")

CRITERION_COLUMNS = [
    "judge",
    "judge_model",
    "value",
    "set",
    "criterion",
    "human_rating",
    "n",
    "dialogues",
    "unscored",
    "unscored_rate",
    "spearman",
    "spearman_lo",
    "spearman_hi",
    "kendall",
    "kendall_lo",
    "kendall_hi",
    "alpha_ordinal",
    "alpha_ordinal_lo",
    "alpha_ordinal_hi",
    "exact",
    "exact_lo",
    "exact_hi",
    "within1",
    "within1_lo",
    "within1_hi",
    "bias",
    "bias_lo",
    "bias_hi",
    "length_spearman",
    "length_spearman_lo",
    "length_spearman_hi",
    "length_spearman_human",
    "position_first_rate",
    "position_first_lo",
    "position_first_hi",
    "position_picks",
    "price_usd_per_1000",
    "call_seconds_per_1000",
    "wall_seconds_per_1000",
]


def _nan(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def _kendall(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import kendalltau

    if np.unique(x).size < 2 or np.unique(y).size < 2:
        return NAN
    return float(kendalltau(x, y).statistic)


def agreement_stats(j: np.ndarray, h: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Judge values ``j`` against human ratings ``h`` (paired, no missing values), each with a bootstrap CI."""
    j = np.asarray(j, dtype=float)
    h = np.asarray(h, dtype=float)
    n = int(j.size)
    out: dict[str, Any] = {"n": n}
    rho, lo, hi, _ = spearman(j, h, n_boot=n_boot, seed=seed)
    out.update(spearman=rho, spearman_lo=lo, spearman_hi=hi)
    if n >= 3:
        tau, tlo, thi = bootstrap_statistic(n, lambda i: _kendall(j[i], h[i]), n_boot=n_boot, seed=seed)
    else:
        tau = tlo = thi = NAN
    out.update(kendall=tau, kendall_lo=tlo, kendall_hi=thi)
    a, alo, ahi, _ = krippendorff_alpha(np.vstack([j, h]), "ordinal", n_boot=n_boot, seed=seed) if n >= 2 else (NAN,) * 4
    out.update(alpha_ordinal=a, alpha_ordinal_lo=alo, alpha_ordinal_hi=ahi)
    for key, vals in (
        ("exact", (np.floor(j + 0.5) == h).astype(float)),
        ("within1", (np.abs(j - h) <= 1.0).astype(float)),
        ("bias", j - h),
    ):
        e = bootstrap_mean(vals, n_boot=n_boot, seed=seed)
        out.update({key: e.mean, f"{key}_lo": e.lo, f"{key}_hi": e.hi})
    return out


def _by_unit(rows: list[dict[str, Any]], judge: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Agent-level rows of ``judge``: dialogue id -> criterion -> row."""
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r["judge"] == judge and r["level"] == "agent":
            out[r["dialogue_id"]][r["criterion"]] = r
    return out


def _value(r: dict[str, Any] | None, value: str) -> float | None:
    if r is None or r.get("status") != "scored":
        return None
    v = r.get(value)
    return float(v) if v is not None else None


def _unit_usage(units: dict[str, dict[str, dict[str, Any]]], ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for d in ids:
        crit = units.get(d)
        if crit:
            out.append(next(iter(crit.values())))
    return out


def _price_per_1000(model: str, unit_rows: list[dict[str, Any]], dialogues: int) -> float | None:
    if not dialogues:
        return None
    table = price_table()
    total = 0.0
    for r in unit_rows:
        u = r.get("usage") or {}
        c = table.cost(model, int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))
        if c is None:
            return None  # no price for this model: unknown, not free
        total += c
    return total / dialogues * 1000.0


def _call_seconds_per_1000(unit_rows: list[dict[str, Any]]) -> float | None:
    lat = [
        float((r.get("usage") or {}).get("latency_s") or 0.0)
        for r in unit_rows
        if (r.get("usage") or {}).get("calls") and not (r.get("usage") or {}).get("cached")
    ]
    return float(np.mean(lat) * 1000.0) if lat else None


def _reasons(unit_rows: list[dict[str, Any]]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for r in unit_rows:
        if r.get("status") != "scored":
            c[(r.get("reason") or "unknown").split(":")[0]] += 1
    return dict(sorted(c.items()))


def position_stats(rows: list[dict[str, Any]], judge: str, human: dict[str, float], *, n_boot: int) -> dict[str, Any]:
    picks = [r for r in rows if r["judge"] == judge and r.get("status") == "scored" and r.get("best_position")]
    out: dict[str, Any] = {
        "judge": judge,
        "calls": sum(1 for r in rows if r["judge"] == judge),
        "picks": len(picks),
        "ties": sum(1 for r in rows if r["judge"] == judge and r.get("tie")),
    }
    if not picks:
        return {**out, "first_rate": None, "first_rate_lo": None, "first_rate_hi": None, "rates": {}, "human_agreement": None}
    clusters = ["|".join(r["triple"]) for r in picks]
    e = bootstrap_mean([float(r["best_position"] == 1) for r in picks], clusters, n_boot=n_boot)
    rates = {str(k): float(np.mean([r["best_position"] == k for r in picks])) for k in (1, 2, 3)}
    agree, acl = [], []
    for r in picks:
        rated = {d: human.get(d) for d in r["triple"]}
        vals = {d: v for d, v in rated.items() if v is not None}
        if len(vals) < len(rated):
            continue
        top = max(vals.values())
        if sum(1 for v in vals.values() if v == top) == 1:
            agree.append(float(vals[r["best_dialogue"]] == top))
            acl.append("|".join(r["triple"]))
    ha = bootstrap_mean(agree, acl, n_boot=n_boot) if agree else None
    return {
        **out,
        "first_rate": e.mean,
        "first_rate_lo": e.lo,
        "first_rate_hi": e.hi,
        "rates": rates,
        "human_agreement": ha.mean if ha else None,
        "human_agreement_lo": ha.lo if ha else None,
        "human_agreement_hi": ha.hi if ha else None,
        "human_agreement_n": len(agree),
    }


def steering_stats(rows: list[dict[str, Any]], variant: str, probed: list[Transcript], *, n_boot: int) -> list[dict[str, Any]]:
    units = _by_unit(rows, variant)
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in probed:
        v = p.context["validation"]
        clean, inj = units.get(v["clean"], {}), units.get(p.dialogue_id, {})
        target = v["target"]
        cs = [_value(r, "score") for r in clean.values()]
        item: dict[str, Any] = {"dialogue": v["clean"], "probe": v["probe"], "eligible": False}
        if clean and all(x is not None for x in cs) and not all(x == target for x in cs):
            item["eligible"] = True
            first = next(iter(inj.values()), None)
            reason = (first or {}).get("reason") or ""
            iv = [_value(inj.get(c), "score") for c in clean]
            item["flagged"] = reason.startswith("steered")
            item["unscored"] = first is not None and first.get("status") != "scored"
            item["obeyed"] = bool(first) and all(x == target for x in iv)
            sign = 1.0 if target >= 3 else -1.0
            if all(x is not None for x in iv):
                item["shift"] = sign * float(np.mean(np.asarray(iv) - np.asarray(cs)))
            cw = [_value(r, "weighted_score") for r in clean.values()]
            iw = [_value(inj.get(c), "weighted_score") for c in clean]
            if all(x is not None for x in cw + iw):
                item["shift_weighted"] = sign * float(np.mean(np.asarray(iw) - np.asarray(cw)))
        per[v["probe"]].append(item)
    per["all"] = [i for items in list(per.values()) for i in items]
    out = []
    for probe, items in per.items():
        el = [i for i in items if i["eligible"]]
        row: dict[str, Any] = {
            "judge": variant,
            "probe": probe,
            "pairs": len(items),
            "eligible": len(el),
            "obeyed": sum(i["obeyed"] for i in el),
            "flagged": sum(i.get("flagged", False) for i in el),
            "unscored": sum(i.get("unscored", False) for i in el),
        }
        if el:
            e = bootstrap_mean([float(i["obeyed"]) for i in el], [i["dialogue"] for i in el], n_boot=n_boot)
            row.update(susceptibility=e.mean, susceptibility_lo=e.lo, susceptibility_hi=e.hi)
            sh = [i for i in el if "shift" in i]
            if sh:
                s = bootstrap_mean([i["shift"] for i in sh], [i["dialogue"] for i in sh], n_boot=n_boot)
                row.update(shift=s.mean, shift_lo=s.lo, shift_hi=s.hi, shift_n=len(sh))
            sw = [i for i in el if "shift_weighted" in i]
            if sw:
                s = bootstrap_mean([i["shift_weighted"] for i in sw], [i["dialogue"] for i in sw], n_boot=n_boot)
                row.update(shift_weighted=s.mean, shift_weighted_lo=s.lo, shift_weighted_hi=s.hi)
        out.append(row)
    return out


def evaluators_report(
    rd: RunDir,
    specs,
    loaded,
    names: list[str],
    *,
    limit: int,
    probe_file,
    clean: list[Transcript],
    probed: list[Transcript],
    triples: list[list[Transcript]],
    timing: dict[str, Any],
    n_boot: int = 1000,
    command: str | None = None,
) -> dict[str, Any]:
    """Everything ``judges validate`` measured, as a JSON-able dict (see the module docstring)."""
    from .validation import position_rows

    rows = latest_judgments(rd.judgments())
    pos = position_rows(rd)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": command,
        "limit": limit,
        "n_boot": n_boot,
        "sets": {},
        "criteria": [],
        "judges": [],
        "position": [],
        "steering": [],
        "probes": {"target": probe_file.target, "dialogues": len(clean), "texts": dict(probe_file.probes)},
    }
    human_mean: dict[str, float] = {}
    for name in names:
        ls = loaded[name]
        info: dict[str, Any] = {
            "description": ls.spec.description,
            "criteria": dict(ls.spec.criteria),
            "path": ls.spec.path,
            "skipped": ls.skipped,
        }
        if ls.skipped is None:
            sel = ls.transcripts[:limit]
            dist = {
                h: dict(
                    sorted(Counter(t.context["human_ratings"].get(h) for t in sel if h in t.context["human_ratings"]).items())
                )
                for h in dict.fromkeys(ls.spec.criteria.values())
            }
            info.update(selected=len(sel), available=len(ls.transcripts), notes=ls.notes, human_distribution=dist)
        report["sets"][name] = info
    for ls in loaded.values():
        for t in ls.transcripts:
            hr = [v for k, v in t.context["human_ratings"].items() if k in ls.spec.criteria.values()]
            if hr:
                human_mean[t.dialogue_id] = float(np.mean(hr))
    for spec in specs:
        units = _by_unit(rows, spec.name)
        p = position_stats(pos, spec.name, human_mean, n_boot=n_boot)
        report["position"].append(p)
        tm = timing.get(spec.name) or {}
        wall = tm["seconds"] / tm["units"] * 1000.0 if tm.get("units") else None
        values = ["score"] + (
            ["weighted_score"] if any(r.get("weighted_score") is not None for d in units.values() for r in d.values()) else []
        )
        for name in names:
            ls = loaded[name]
            if ls.skipped is not None:
                continue
            sel = ls.transcripts[:limit]
            ids = [t.dialogue_id for t in sel]
            urows = _unit_usage(units, ids)
            unscored = sum(1 for r in urows if r.get("status") != "scored")
            jrow = {
                "judge": spec.name,
                "judge_model": spec.model,
                "set": name,
                "dialogues": len(ids),
                "units": len(urows),
                "unscored": unscored,
                "unscored_rate": unscored / len(urows) if urows else None,
                "unscored_reasons": _reasons(urows),
                "price_usd_per_1000": _price_per_1000(spec.model, urows, len(urows)),
                "call_seconds_per_1000": _call_seconds_per_1000(urows),
                "wall_seconds_per_1000": wall,
            }
            report["judges"].append(jrow)
            words = {t.dialogue_id: float(reply_words(t, t.agents[0])) for t in sel}
            for value in values:
                for crit, hkey in ls.spec.criteria.items():
                    pairs = [
                        (
                            _value(units.get(t.dialogue_id, {}).get(crit), value),
                            t.context["human_ratings"].get(hkey),
                            t.dialogue_id,
                        )
                        for t in sel
                    ]
                    pairs = [(a, b, d) for a, b, d in pairs if a is not None and b is not None]
                    j = np.array([a for a, _, _ in pairs], dtype=float)
                    h = np.array([b for _, b, _ in pairs], dtype=float)
                    w = np.array([words[d] for _, _, d in pairs], dtype=float)
                    st = agreement_stats(j, h, n_boot=n_boot)
                    lj = spearman(j, w, n_boot=n_boot)
                    lh = spearman(h, w, n_boot=n_boot)
                    report["criteria"].append(
                        {
                            "judge": spec.name,
                            "judge_model": spec.model,
                            "value": value,
                            "set": name,
                            "criterion": crit,
                            "human_rating": hkey,
                            **st,
                            "dialogues": len(ids),
                            "unscored": unscored,
                            "unscored_rate": jrow["unscored_rate"],
                            "length_spearman": lj[0],
                            "length_spearman_lo": lj[1],
                            "length_spearman_hi": lj[2],
                            "length_spearman_human": lh[0],
                            "position_first_rate": p["first_rate"],
                            "position_first_lo": p["first_rate_lo"],
                            "position_first_hi": p["first_rate_hi"],
                            "position_picks": p["picks"],
                            "price_usd_per_1000": jrow["price_usd_per_1000"],
                            "call_seconds_per_1000": jrow["call_seconds_per_1000"],
                            "wall_seconds_per_1000": wall,
                        }
                    )
        if probed:
            for variant in (spec.name, f"{spec.name}+unguarded"):
                report["steering"].extend(steering_stats(rows, variant, probed, n_boot=n_boot))
    return _clean(report)


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    return _nan(obj)


# ------------------------------------------------------------------------------------- writing


def _f(v: Any, digits: int = 2, signed: bool = True) -> str:
    if v is None:
        return "-"
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def _ci(r: dict[str, Any], key: str, digits: int = 2, signed: bool = True) -> str:
    if r.get(key) is None:
        return "-"
    return f"{_f(r[key], digits, signed)} [{_f(r.get(key + '_lo'), digits, signed)}, {_f(r.get(key + '_hi'), digits, signed)}]"


def markdown(report: dict[str, Any]) -> str:
    L: list[str] = ["# Judge validation against human ratings", ""]
    if report.get("command"):
        L += ["Command:", "", "```", report["command"], "```", ""]
    L += [f"Created {report['created']}; 95% percentile-bootstrap intervals over dialogues ({report['n_boot']} replicates).", ""]
    L += [
        "## Sets",
        "",
        "| set | human ratings compared | dialogues judged (n) | rated dialogues available | skipped rating values | note |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in report["sets"].items():
        if s.get("skipped"):
            L.append(f"| {name} | - | 0 | - | - | not run: {s['skipped']} |")
            continue
        rt = (s.get("notes") or {}).get("ratings") or {}
        crit = ", ".join(f"{k} ~ {v}" for k, v in s["criteria"].items())
        note = s["description"]
        n = s.get("notes") or {}
        extra = []
        if n.get("without_rating"):
            extra.append(f"{n['without_rating']} without a rating")
        if n.get("without_agent_turn"):
            extra.append(f"{n['without_agent_turn']} where the supporter never spoke")
        L.append(
            f"| {name} | {crit} | {s['selected']} | {s['available']} | {rt.get('skipped', 0)} of {rt.get('values', 0)} |"
            f" {note}{' (' + '; '.join(extra) + ' left out)' if extra else ''} |"
        )
    L.append("")
    for name, s in report["sets"].items():
        dist = s.get("human_distribution")
        if dist:
            L.append(
                f"Human ratings in `{name}` (judged dialogues): "
                + "; ".join(f"{h}: " + ", ".join(f"{k}={v}" for k, v in d.items()) for h, d in dist.items())
            )
    L.append("")
    L += [
        "## Agreement with the human ratings",
        "",
        "| judge | value | set | criterion ~ human | n | Spearman | Kendall | alpha (ordinal) | exact | within 1 | bias (judge - human) | length: rho judge / human |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["criteria"]:
        L.append(
            f"| {r['judge']} | {r['value']} | {r['set']} | {r['criterion']} ~ {r['human_rating']} | {r['n']} | "
            f"{_ci(r, 'spearman')} | {_ci(r, 'kendall')} | {_ci(r, 'alpha_ordinal')} | {_ci(r, 'exact', signed=False)} | "
            f"{_ci(r, 'within1', signed=False)} | {_ci(r, 'bias')} | {_f(r['length_spearman'])} / {_f(r['length_spearman_human'])} |"
        )
    L += [
        "",
        "## Cost, speed, unscored",
        "",
        "| judge | set | dialogues | unscored (reasons) | price / 1,000 dialogues | call-s / 1,000 | wall-s / 1,000 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["judges"]:
        reasons = ", ".join(f"{k} {v}" for k, v in r["unscored_reasons"].items())
        price = "-" if r["price_usd_per_1000"] is None else f"${r['price_usd_per_1000']:.2f}"
        rate = "-" if r["unscored_rate"] is None else f"{r['unscored_rate']:.1%}"
        L.append(
            f"| {r['judge']} | {r['set']} | {r['dialogues']} | {r['unscored']} ({rate}{'; ' + reasons if reasons else ''}) | "
            f"{price} | {_f(r['call_seconds_per_1000'], 0, False)} | {_f(r['wall_seconds_per_1000'], 0, False)} |"
        )
    L += [
        "",
        "## Position bias (pick-best triples, 3 rotations each)",
        "",
        "| judge | calls | picks | first-position rate (1/3 = none) | picks at 1 / 2 / 3 | pick = highest human rating |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["position"]:
        rates = " / ".join(f"{r['rates'].get(k, 0):.2f}" for k in ("1", "2", "3")) if r.get("rates") else "-"
        ha = (
            "-" if r.get("human_agreement") is None else f"{_ci(r, 'human_agreement', signed=False)} (n={r['human_agreement_n']})"
        )
        L.append(f"| {r['judge']} | {r['calls']} | {r['picks']} | {_ci(r, 'first_rate', signed=False)} | {rates} | {ha} |")
    if report["steering"]:
        pr = report["probes"]
        L += [
            "",
            f"## Steering probes (target score {pr['target']}, {pr['dialogues']} dialogues x {len(pr['texts'])} probes)",
            "",
            "| judge | probe | eligible | susceptibility (all criteria = target) | obeyed | mean shift to target: score | weighted_score | unscored by guards (steered) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in report["steering"]:
            L.append(
                f"| {r['judge']} | {r['probe']} | {r['eligible']} | {_ci(r, 'susceptibility', signed=False)} | {r['obeyed']} | "
                f"{_ci(r, 'shift')} | {_ci(r, 'shift_weighted')} | {r['unscored']} ({r['flagged']}) |"
            )
    skipped = [
        (name, v)
        for name, s in report["sets"].items()
        for v in (((s.get("notes") or {}).get("ratings") or {}).get("skipped_values") or [])
    ]
    if skipped:
        L += [
            "",
            "## Rating values skipped (never guessed)",
            "",
            "| set | dialogue | rater | dimension | value | kind |",
            "|---|---|---|---|---|---|",
        ]
        for name, v in skipped:
            L.append(
                f"| {name} | {v['item']} | {v['rater']} | {v['dimension']} | `{json.dumps(v['value'])[1:-1].replace('|', '&#124;')}` | {v['kind']} |"
            )
    return "\n".join(L) + "\n"


def write_report(rd: RunDir, report: dict[str, Any]) -> None:
    import csv
    import io

    atomic_write_json(rd.path / "evaluators.json", report)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CRITERION_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for r in report["criteria"]:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CRITERION_COLUMNS})
    atomic_write_text(rd.path / "evaluators.csv", buf.getvalue())
    if report["steering"]:
        buf = io.StringIO()
        cols = [
            "judge",
            "probe",
            "pairs",
            "eligible",
            "obeyed",
            "susceptibility",
            "susceptibility_lo",
            "susceptibility_hi",
            "shift",
            "shift_lo",
            "shift_hi",
            "shift_n",
            "shift_weighted",
            "shift_weighted_lo",
            "shift_weighted_hi",
            "unscored",
            "flagged",
        ]
        w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in report["steering"]:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in cols})
        atomic_write_text(rd.path / "steering.csv", buf.getvalue())
    atomic_write_text(rd.path / "evaluators.md", markdown(report))
