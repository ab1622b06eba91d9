"""An ablation's figures (tools/ablate.py trains and scores its runs): each figure over the
training seeds (mean and standard error), every arm paired with the first seed by seed (95%
t-interval, n), the arms read off their frontiers at one diversity; and the entries results/
tables keep of a report, joined seed by seed when a sweep is continued. No command: the
ablation command and results/*/table.py import it."""

import json
import math
import os
import shutil

from lib.decompose import summary
from lib.metrics import mean_se, paired_interval, value_at

METRICS = (
    "ppl_ratio",
    "entropy_ratio",
    "repetition",
    "copies",
    "ngrams_seen",
    "ppl",
    "entropy",
    "distinct_2_matched",
    "mauve",
    "kn_ppl_ratio",
    "length",
)
# the yardstick table's figures, in its columns' order
YARDSTICK = (
    "ppl_ratio",
    "entropy_ratio",
    "repetition",
    "copies",
    "ngrams_seen",
    "val_mse",
    "val_ce",
)
# the instrument's figures (evaluate.py: diversity at a matched size, MAUVE, the n-gram judge)
INSTRUMENT = ("distinct_2_matched", "mauve", "kn_ppl_ratio", "length")
# the error decomposition's headline figures (decompose.summary): is an effect the decoder's or
# the flow's?
DECOMPOSITION = (
    "dec_acc",
    "dec_acc_seen",
    "nn_acc",
    "rt_acc_0.9",
    "rt_rep_0.9",
    "rt_acc_0.5",
    "rt_rep_0.5",
    "adj_cos_first",
    "end_nn_cos",
)
# the run's last validation losses: denoise MSE in velocity space, decode CE
LOSSES = ("val_mse", "val_ce")


def summarise(results, arms, eval_arms):
    """Per (arm, eval arm): each training seed's yardstick, mean and s.e. over the seeds, and the
    paired interval against the first arm."""
    rows = []
    for arm, _ in arms:
        for label, _ in eval_arms:
            per_seed, nfe = [], None
            for (a, seed), (reports, losses) in sorted(results.items()):
                if a == arm:
                    (r,) = reports[label]["results"][:1]
                    nfe = r.get("nfe")  # network forwards a sample
                    real = reports[label]["reference"]["real"]
                    decomp = reports[label].get("decomposition")
                    per_seed.append(
                        {
                            "seed": seed,  # no judge: no Gen. PPL, nor its ratio
                            **{
                                f"real_{k}": real[k]["mean"]
                                for k in ("ppl", "entropy")
                                if k in real
                            },
                            **{
                                k: r[k] if isinstance(r[k], float) else r[k]["mean"]
                                for k in METRICS
                                if k in r
                            },
                            **losses,
                            **(summary(decomp) if decomp else {}),
                            "example": r.get("examples", [""])[0],
                            "provenance": r.get("provenance"),
                        }
                    )
            rows.append(
                {
                    "arm": arm,
                    "eval_arm": label,
                    "nfe": nfe,
                    **over_seeds(per_seed),
                    "per_seed": per_seed,
                    "provenance": unique(p["provenance"] for p in per_seed if p["provenance"]),
                }
            )
    pair_with_first(rows, arms)
    return rows


def over_seeds(per_seed) -> dict:
    """{figure: {mean, se}} over the training seeds, for each figure every seed has."""
    keys = [k for k in (*METRICS, *LOSSES, *DECOMPOSITION) if all(k in p for p in per_seed)]
    return {k: dict(zip(("mean", "se"), mean_se([p[k] for p in per_seed]))) for k in keys}


def unique(items) -> list:
    """items without repeats, in their order (provenance records: dicts, not hashable)."""
    out = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def pair_with_first(rows, arms):
    """Each row but the first arm's gets vs_base: its difference from the first arm's row of the
    same eval arm, seed by seed (versus)."""
    for r in rows:
        base = next(b for b in rows if b["arm"] == arms[0][0] and b["eval_arm"] == r["eval_arm"])
        if r is not base:
            r["vs_base"] = versus(r["per_seed"], base["per_seed"])


def axes(rows):
    """The frontier's axes: distinct-2 at a matched size (x: more diverse) against the Gen. PPL
    ratio where a GPT-2 judge scored, else the n-gram judge's (y: lower is better); x falls back
    to entropy's ratio in reports from before the instrument."""
    yk = "ppl_ratio" if all("ppl_ratio" in r for r in rows) else "kn_ppl_ratio"
    xk = "distinct_2_matched" if all("distinct_2_matched" in r for r in rows) else "entropy_ratio"
    return xk, yk


def frontiers(rows):
    """The axes (axes()) and {(arm, training seed): [(x, log y) per eval arm]}: each run's
    points, one per sampler setting; {} where any run has fewer than two (no frontier to read
    a diversity off)."""
    xk, yk = axes(rows)
    out = {}
    for r in rows:
        for p in r.get("per_seed", ()):
            if xk in p and yk in p:
                out.setdefault((r["arm"], p["seed"]), []).append((p[xk], math.log(p[yk])))
    return xk, yk, out if out and min(map(len, out.values())) > 1 else {}


def at_matched_diversity(rows, arms) -> dict:
    """Each arm's PPL ratio read off its frontier at one diversity: every (arm, training seed)
    has a point per eval arm (a sampler setting); the diversity is the middle of the range that
    all of them span, each one's log PPL interpolated there (lib.metrics.value_at), and each arm
    is paired with the first seed by seed. {} with fewer than two eval arms; 'at' None (and
    why) where the frontiers share no diversity."""
    xk, yk, frontier = frontiers(rows)
    if not frontier:
        return {}
    lo = max(min(x for x, _ in v) for v in frontier.values())
    hi = min(max(x for x, _ in v) for v in frontier.values())
    out = {"x": xk, "y": yk, "range": [lo, hi], "at": None}
    if lo > hi:
        out["why"] = (
            f"the frontiers share no {xk}: one tops out at {hi:.3g}, another starts at {lo:.3g}"
        )
        return out
    out["at"] = at = (lo + hi) / 2
    per_arm = {
        a: {str(s): math.exp(value_at(v, at)) for (b, s), v in sorted(frontier.items()) if b == a}
        for a, _ in arms
    }
    base = per_arm[arms[0][0]]
    out["arms"] = {}
    for a, per_seed in per_arm.items():
        mean, se = mean_se(list(per_seed.values()))
        row = {"per_seed": per_seed, "mean": mean, "se": se, "n": len(per_seed)}
        both = [s for s in per_seed if s in base]
        if a != arms[0][0] and both:
            row["vs_base"] = dict(
                zip(
                    ("diff", "lo", "hi", "n"),
                    paired_interval([per_seed[s] for s in both], [base[s] for s in both]),
                )
            )
        out["arms"][a] = row
    return out


def matched_pairs(rows, arms) -> dict:
    """With three arms or more: each arm against the first, seed by seed: a training seed's two
    runs read off their own frontiers (log y interpolated, lib.metrics.value_at) at the middle of
    the diversity range both span, so that one arm whose diversity collapses leaves the others
    comparable. {arm: {x, y, per_seed: [{seed, at, arm, base}], unmatched: [seeds whose runs
    share no diversity], and the paired difference (diff, lo, hi, n) over the matched seeds}};
    {} with two arms (at_matched_diversity reads those) or where any run has one sampler
    setting (no frontier)."""
    if len(arms) < 3:
        return {}
    xk, yk, frontier = frontiers(rows)
    if not frontier:
        return {}
    base, pairs = arms[0][0], {}
    for arm, _ in arms[1:]:
        out = {"x": xk, "y": yk, "per_seed": [], "unmatched": []}
        for (a, seed), mine in sorted(frontier.items()):
            theirs = frontier.get((base, seed))
            if a != arm or theirs is None:
                continue
            lo = max(min(x for x, _ in mine), min(x for x, _ in theirs))
            hi = min(max(x for x, _ in mine), max(x for x, _ in theirs))
            if lo > hi:
                out["unmatched"].append(seed)
                continue
            at = (lo + hi) / 2
            y = {k: math.exp(value_at(v, at)) for k, v in (("arm", mine), ("base", theirs))}
            out["per_seed"].append({"seed": seed, "at": at, **y})
        if out["per_seed"]:
            ys = [(p["arm"], p["base"]) for p in out["per_seed"]]
            out.update(zip(("diff", "lo", "hi", "n"), paired_interval(*zip(*ys))))
        pairs[arm] = out
    return pairs


def versus(per_seed, base_per_seed) -> dict:
    """{metric: (mean difference, 95% lo, hi, n)} over the training seeds both arms ran."""
    base = {p["seed"]: p for p in base_per_seed}
    pairs = [(p, base[p["seed"]]) for p in per_seed if p["seed"] in base]
    out = {}
    for k in (*METRICS, *LOSSES):
        have = [(a[k], b[k]) for a, b in pairs if k in a and k in b]
        if have:
            out[k] = dict(zip(("diff", "lo", "hi", "n"), paired_interval(*zip(*have))))
    return out


def kept_entry(rep: dict, per_seed_keys, portable=lambda text: text) -> dict:
    """An ablation's report.json as a results/ table keeps it: the settings that say what was
    run (through portable(): no machine's paths), each row's means with each training seed's
    per_seed_keys beside them, its paired differences and provenance, and the arms at matched
    diversity where the report has them and more than one sampler setting."""
    cfg = {
        k: portable(str(v))
        for k, v in rep["config"].items()
        if k in ("name", "base", "common", "seeds", "n", "eval_seeds", "judge")
    }
    keys = [k for k in (*METRICS, *LOSSES, *DECOMPOSITION) if all(k in r for r in rep["rows"])]
    multi = len(rep["eval_arms"]) > 1
    return {
        "config": cfg,
        "arms": rep["arms"],
        "eval_arms": rep["eval_arms"],
        "rows": [
            {
                "arm": r["arm"],
                "eval_arm": r["eval_arm"],
                "nfe": r["nfe"],
                **{k: r[k] for k in keys},
                "example": r["per_seed"][0]["example"],
                "seeds": [{k: p[k] for k in per_seed_keys if k in p} for p in r["per_seed"]],
                **{k: r[k] for k in ("vs_base", "provenance") if k in r},
            }
            for r in rep["rows"]
        ],
        # a report of one sampler setting has no frontier to match on (reports written before
        # matched_pairs said so held a reading of every seed as unmatched)
        **{k: rep[k] for k in ("matched", "matched_pairs") if k in rep and multi},
    }


# the per-seed figures the instrument's tables keep (results/bottleneck, refinements, headline)
INSTRUMENT_SEED = (
    "seed",
    "kn_ppl_ratio",
    "distinct_2_matched",
    "mauve",
    "length",
    "copies",
    "ngrams_seen",
)


def kept_reports(folders, per_seed_keys, plots_to: str = "") -> list:
    """kept_entry of each tools.ablate report folder's report.json, in the order given; with
    plots_to, each folder's ablation.png is copied there as <ablation name>.png."""
    entries = []
    for folder in folders:
        with open(os.path.join(folder, "report.json")) as f:
            entry = kept_entry(json.load(f), per_seed_keys)
        plot = os.path.join(folder, "ablation.png")
        if plots_to and os.path.exists(plot):
            shutil.copyfile(plot, os.path.join(plots_to, f"{entry['config']['name']}.png"))
        entries.append(entry)
    return entries


def join_seeds(old: dict, new: dict) -> dict:
    """Two kept entries (kept_entry) of one ablation as one, seed by seed: a sweep continued on
    other training seeds (later, on the machine at hand) joins the kept seeds, and a seed both
    ran takes new's figures; new alone when it ran every seed old did, so collecting the same
    report twice changes nothing. Each row's means, paired differences and matched readings
    are computed again from the seeds' kept figures (a figure some seed does not keep is left
    out); the provenance of both where both supply seeds, so each row names every machine it
    ran on. ValueError if they differ in more than seeds."""
    what = lambda e: (
        {k: v for k, v in e["config"].items() if k != "seeds"},
        e["arms"],
        e["eval_arms"],
        [(r["arm"], r["eval_arm"]) for r in e["rows"]],
    )
    if what(old) != what(new):
        raise ValueError(f"{new['config']['name']}: the two sweeps differ in more than seeds")
    seeds = lambda e: {p["seed"] for r in e["rows"] for p in r["seeds"]}
    if seeds(new) >= seeds(old):
        return new
    rows = []
    for a, b in zip(old["rows"], new["rows"]):
        redone = {p["seed"] for p in b["seeds"]}
        kept = [p for p in a["seeds"] if p["seed"] not in redone]
        per_seed = sorted(kept + b["seeds"], key=lambda p: p["seed"])
        rows.append(
            {
                "arm": a["arm"],
                "eval_arm": a["eval_arm"],
                "nfe": a["nfe"],
                **over_seeds(per_seed),
                "example": (b if per_seed[0]["seed"] in redone else a)["example"],
                "per_seed": per_seed,
                "provenance": unique((a.get("provenance") or []) + (b.get("provenance") or [])),
            }
        )
    arms = new["arms"]
    pair_with_first(rows, arms)
    matched, pairs = at_matched_diversity(rows, arms), matched_pairs(rows, arms)
    return {
        "config": {
            **new["config"],
            "seeds": ",".join(str(s) for s in sorted(seeds(old) | seeds(new))),
        },
        "arms": arms,
        "eval_arms": new["eval_arms"],
        "rows": [
            {**{k: v for k, v in r.items() if k != "per_seed"}, "seeds": r["per_seed"]}
            for r in rows
        ],
        **({"matched": matched} if matched else {}),
        **({"matched_pairs": pairs} if pairs else {}),
    }
