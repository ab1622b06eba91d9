"""The search table of results/recipe/: one row per run, the error decomposition beside the yardstick.

    python results/recipe/table.py            # markdown on stdout
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
GRID = {"logit_normal": "LN", "uniform": "uniform"}


def row(name):
    rep = json.load(open(os.path.join(HERE, name, "report.json")))
    r = rep["results"][0]
    d = rep.get("decomposition")
    with open(os.path.join(HERE, name, "metrics.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    last = [x for x in recs if "val_mse" in x][-1]
    steps = max(x["step"] for x in recs)
    rt = {x["t0"]: x for x in d["round_trip"]} if d else {}
    cells = [name, str(steps), GRID[r["setting"]["grid"]], f"{last['val_mse']:.3f}", f"{last['val_ce']:.2f}"]
    if d:
        cells += [f"{d['decoder']['acc_text']:.3f}", f"{d['decoder']['nn_acc_text']:.3f}",
                  f"{rt[0.9]['acc_text']:.2f} / {rt[0.9]['repetition']:.2f}",
                  f"{rt[0.5]['acc_text']:.2f} / {rt[0.5]['repetition']:.2f}",
                  f"{d['adjacent_cosine']['first_step_text']:.2f} ({d['adjacent_cosine']['real_text']:.2f})"]
    else:
        cells += [""] * 5
    real = rep["reference"]["real"]["ppl"]["mean"]
    cells += [f"{r['ppl_ratio']:.2f} ± {r['ppl']['se'] / real:.2f}",
              f"{r['entropy_ratio']:.2f}", f"{r['repetition']['mean']:.2f}", f"{r['copies']['mean']:.2f}"]
    # the same checkpoint on the other time grid, where the evaluation swept it
    o = next((x for x in rep["results"][1:] if x["setting"]["grid"] != r["setting"]["grid"]
              and x["setting"]["steps"] == r["setting"]["steps"] and x["setting"]["sampler"] == r["setting"]["sampler"]),
             None)
    cells += [f"{GRID[o['setting']['grid']]}: {o['ppl_ratio']:.2f} ± {o['ppl']['se'] / real:.2f} / "
              f"{o['entropy_ratio']:.2f} / {o['repetition']['mean']:.2f}" if o else ""]
    cells += [f"{d['decoder']['acc_text_seen']:.3f}" if d and "acc_text_seen" in d["decoder"] else "",
              r["examples"][0]]
    return "| " + " | ".join(cells) + " |"


names = sorted(d for d in os.listdir(HERE) if os.path.isfile(os.path.join(HERE, d, "report.json")))
print("| run | steps | grid | val MSE | val CE | decoder (clean) | nearest latent | round trip 0.9 acc / rep | "
      "round trip 0.5 acc / rep | neighbours' cos, 1st step (real) | Gen. PPL / real | entropy / real | "
      "repetition | copies | the other grid: PPL / entropy / repetition | decoder on tokens training shows | "
      "first sample |")
print("|---" * 17 + "|")
for n in names:
    print(row(n))
