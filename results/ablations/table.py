"""The seven ablations of results/ablations/ in one table.md: per ablation the table that
tools/ablate.py wrote (python -m tools.ablate: its report.md), from table.json.

    python results/ablations/table.py                # table.md from the kept table.json
    python results/ablations/table.py --collect \
        runs/ablations/reports                       # table.json from the reports, then table.md

Two steps: collect reads each ablation's report.json (run.sh has tools.ablate write them to
runs/ablations/reports/NAME/) into table.json, without the machine's paths (the latent cache's
folder, the judge's absolute path), and copies the plots of PLOTS here; render writes table.md
from table.json alone, in the layout of tools.ablate's report.md, so the table is rebuilt byte
for byte from what is kept.
"""
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ("prediction_460", "encoder_460", "self_conditioning_460", "denoise_share_230",
         "bottleneck_230", "sampler_460", "sc_cfg_460")
METRICS = ("ppl_ratio", "entropy_ratio", "repetition", "copies", "ngrams_seen", "val_mse", "val_ce")
PLOTS = ("prediction_460", "sampler_460")      # their ablation.png -> <name>.png here
DECOMPOSITION = ("dec_acc", "dec_acc_seen", "nn_acc", "rt_acc_0.9", "rt_rep_0.9", "rt_acc_0.5",
                 "rt_rep_0.5", "adj_cos_first", "end_nn_cos")


def portable(text):
    """A setting without this machine's paths: no --cache_dir (where the latents are cached does
    not change them), a judge under judges/ named from there."""
    text = re.sub(r"\s*--cache_dir[= ]\S+", "", text).strip()
    return re.sub(r"\S*/(judges/\S+)", r"\1", text)


def collect(root):
    out = []
    for name in ORDER:
        path = os.path.join(root, name, "report.json")
        if not os.path.exists(path):
            continue
        rep = json.load(open(path))
        cfg = rep["config"]
        if name in PLOTS and os.path.exists(os.path.join(root, name, "ablation.png")):
            shutil.copyfile(os.path.join(root, name, "ablation.png"),
                            os.path.join(HERE, f"{name}.png"))
        keys = [k for k in (*METRICS, *DECOMPOSITION) if all(k in r for r in rep["rows"])]
        out.append({"name": cfg["name"], "base": cfg["base"], "common": portable(cfg["common"]),
                    "seeds": cfg["seeds"], "n": cfg["n"], "eval_seeds": cfg["eval_seeds"],
                    "judge": portable(cfg["judge"]),
                    "arms": rep["arms"], "eval_arms": rep["eval_arms"],
                    "rows": [{"arm": r["arm"], "eval_arm": r["eval_arm"], "nfe": r["nfe"],
                              **{k: r[k] for k in keys},
                              "example": r["per_seed"][0]["example"]} for r in rep["rows"]]})
    return {"ablations": out}


def render_one(a):
    f = lambda r, k: f"{r[k]['mean']:.3g} ± {r[k]['se']:.2g}"
    common = f" {a['common']}" if a["common"] else ""
    lines = [f"## `{a['name']}`", "",
             f"Ablation `{a['name']}`: base `{a['base']}`{common}; training seeds {a['seeds']}; "
             f"each run scored with {a['n']} samples x evaluation seeds {a['eval_seeds']} by "
             f"`{a['judge']}`; mean ± standard error over training seeds.", "",
             "| arm | eval | NFE | Gen. PPL / real | entropy / real | repetition | copies | "
             "n-grams seen | val MSE (v) | val CE | example |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = a["rows"]
    lines += [f"| {r['arm']} | {r['eval_arm']} | {r['nfe']} | {f(r, 'ppl_ratio')} | "
              f"{f(r, 'entropy_ratio')} | {f(r, 'repetition')} | "
              f"{f(r, 'copies')} | {f(r, 'ngrams_seen')} | {f(r, 'val_mse')} | {f(r, 'val_ce')} | "
              f"{r['example']} |" for r in rows]
    decomp = [k for k in DECOMPOSITION if all(k in r for r in rows)]
    if decomp:
        lines += ["", "The error decomposition (decoder on clean latents, nearest-latent ceiling, "
                  "round trips from t0, neighbouring x_hat's cosine at the first step, end points' "
                  "cosine to a training latent):", "",
                  "| arm | eval | " + " | ".join(decomp) + " |", "|---|---|" + "---|" * len(decomp)]
        lines += [f"| {r['arm']} | {r['eval_arm']} | " + " | ".join(f(r, k) for k in decomp) + " |"
                  for r in rows]
    lines += ["", "Arms: " + "; ".join(f"`{x}`: `{' '.join(o) or '(base)'}`" for x, o in a["arms"]),
              "Eval arms: " + "; ".join(f"`{x}`: `{' '.join(o) or '(the run preset)'}`"
                                        for x, o in a["eval_arms"])]
    return "\n".join(lines) + "\n"


def render(table):
    return "\n".join(render_one(a) for a in table["ablations"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--collect"]:
        table = collect(sys.argv[2] if len(sys.argv) > 2 else "runs/ablations/reports")
        with open(os.path.join(HERE, "table.json"), "w") as f:
            json.dump(table, f, indent=1, ensure_ascii=False)
            f.write("\n")
    with open(os.path.join(HERE, "table.json")) as f:
        table = json.load(f)
    with open(os.path.join(HERE, "table.md"), "w") as f:
        f.write(render(table))
    print(f"wrote {os.path.join(HERE, 'table.md')}")
