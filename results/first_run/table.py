"""The search table of results/first_run/README.md, from each run's report.json:
    python results/first_run/table.py > results/first_run/table.md"""
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
overrides = {}
for line in open(os.path.join(here, "runs.txt")):
    name, _, args = line.strip().partition(" ")
    overrides[name] = args or "(base)"
print("| run | overrides of configs/tiny.py | sampler | Gen. PPL (x real) | entropy (x real) | repetition | copies |")
print("|---|---|---|---|---|---|---|")
for name in sorted(d for d in os.listdir(here) if os.path.isfile(os.path.join(here, d, "report.json"))):
    rep = json.load(open(os.path.join(here, name, "report.json")))
    for r in rep["results"]:
        s = r["setting"]
        label = f"{s['sampler']} {s['steps']}, w {s['sc_cfg']:g}" if "sampler" in s else "samples"
        print(f"| {name} | `{overrides.get(name, '?')}` | {label} | {r['ppl']['mean']:.0f} ± {r['ppl']['se']:.0f} "
              f"({r['ppl_ratio']:.2f}) | {r['entropy']['mean']:.2f} ({r['entropy_ratio']:.2f}) | "
              f"{r['repetition']['mean']:.2f} | {r['copies']['mean']:.2f} |")
    real = rep["reference"]["real"]
    print(f"| {name}: real text | | | {real['ppl']['mean']:.0f} | {real['entropy']['mean']:.2f} | "
          f"{real['repetition']['mean']:.2f} | {real['copies']['mean']:.2f} |")
