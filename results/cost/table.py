"""The cost benchmark's table and pictures (results/cost/README.md): what measure.py wrote under a
runs folder (one measure.json per run: a length's trained systems, or the random-weight shapes of
--cost_only) -> table.json -> table.md and, for each run with quality, NAME.png: the n-gram judge's
PPL over real text's and MAUVE against seconds per sample (log x), at batch 1 and at batch 64,
one curve per system and sampler.

    python results/cost/table.py --collect runs/cost   # table.json from the runs, then the rest
    python results/cost/table.py                       # table.md and plots from the kept table.json

Two steps, as every results/ table: collect reads the runs' measure.json files into table.json
(a run already kept there under another name stays: 16 and 64 tokens are measured apart);
render writes table.md from table.json alone, so the table rebuilds byte for byte.
"""

import json
import os
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.config import parse  # noqa: E402
from lib.outputs import atomic_write_text  # noqa: E402
from lib.report import pyplot, read_table  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
COST = ("steps", "nfe", "latency_s", "throughput", "first_s", "weights_mb")
COST += ("peak_b1_mb", "peak_b64_mb")
MEAN = ("mauve", "distinct_2_matched", "length", "copies")  # quality kept as mean (and s.e.)


def slim(row: dict) -> dict:
    """A measure.json row as the table keeps it: the costs, the quality's headline figures, one
    example."""
    out = {k: row[k] for k in ("length", "system", "setting", *COST)}
    q = row.get("quality")
    if q:
        out["quality"] = {k: q[k] for k in ("kn_ppl_ratio", "ppl_ratio") if k in q}
        out["quality"].update({k: q[k] for k in MEAN})
        out["example"] = row["examples"][0] if row["examples"] else ""
    return out


def collect(root: str) -> dict:
    """Every root/**/measure.json, in the order of their folders' names."""
    found = sorted(
        os.path.relpath(d, root) for d, _, files in os.walk(root) if "measure.json" in files
    )
    if not found:
        raise FileNotFoundError(f"no measure.json under {root}: run results/cost/measure.py")
    runs = []
    for name in found:
        with open(os.path.join(root, name, "measure.json")) as f:
            rep = json.load(f)
        entry = {"name": name.replace(os.sep, "/"), "context": rep["context"]}
        entry.update({k: rep[k] for k in ("machine", "torch", "git_commit")})
        if "reference" in rep:
            ref = rep["reference"]
            entry["reference"] = {
                kind: {k: ref[kind][k]["mean"] for k in ("kn_ppl", *MEAN) if k in ref[kind]}
                for kind in ("real", "shuffled")
            }
            entry["reference"]["matched_size"] = ref["matched_size"]
        entry["rows"] = [slim(r) for r in rep["rows"]]
        runs.append(entry)
    return {"runs": runs}


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def render(table: dict) -> str:
    parts = []
    for e in table["runs"]:
        c, m = e["context"], e["machine"]
        seeds = len(str(c["seeds"]).split(","))
        head = (
            f"## {e['name']}: {'random weights, ' + c['shape'] if c['cost_only'] else 'trained'}, "
            f"{c['device']} ({c['threads']} threads, {m.get('cpu', '?')}), torch {e['torch']}, "
            f"commit {str(e['git_commit'])[:7]}"
        )
        lines = [head, ""]
        lines.append(
            f"{c['n']} samples x {seeds} seeds at batch {c['batch']}; batch 1: median of "
            f"{c['latency_repeats']} samples after a warm-up; compile {c['compile']}."
            + (f" Quality on the {c['split']} split." if not c["cost_only"] else "")
        )
        ref = e.get("reference")
        if ref:
            r, s = ref["real"], ref["shuffled"]
            lines.append(
                f"Real held-out text: n-gram PPL {r['kn_ppl']:.1f}, MAUVE {r['mauve']:.3f}, "
                f"distinct-2 {r['distinct_2_matched']:.3f} (at {ref['matched_size']} texts), "
                f"length {r['length']:.1f}, copies {r['copies']:.3f}; shuffled: n-gram PPL "
                f"{s['kn_ppl']:.1f}, MAUVE {s['mauve']:.3f}."
            )
        quality = any("quality" in row for row in e["rows"])
        gen = any("ppl_ratio" in row.get("quality", {}) for row in e["rows"])
        cols = ["L", "system", "setting", "NFE", "s/sample b1", "samples/s b64", "s/sample b64"]
        cols += ["first call s", "weights MB", "peak MB b1", "peak MB b64"]
        if quality:
            cols += ["n-gram PPL / real", "MAUVE", "distinct-2", "length", "copies"]
            cols += ["Gen. PPL / real"] if gen else []
        lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for row in e["rows"]:
            cells = [str(row["length"]), row["system"], row["setting"], fmt(row["nfe"], ".1f")]
            cells += [f"{row['latency_s']:.4f}", f"{row['throughput']:.2f}"]
            cells += [f"{1 / row['throughput']:.4f}", f"{row['first_s']:.2f}"]
            cells += [f"{row['weights_mb']:.1f}", fmt(row["peak_b1_mb"], ".1f")]
            cells += [fmt(row["peak_b64_mb"], ".1f")]
            q = row.get("quality")
            if q:
                mv = q["mauve"]
                cells += [f"{q['kn_ppl_ratio']:.2f}", f"{mv['mean']:.3f} ± {mv['se']:.3f}"]
                cells += [f"{q[k]['mean']:.3f}" for k in ("distinct_2_matched",)]
                cells += [f"{q['length']['mean']:.1f}", f"{q['copies']['mean']:.3f}"]
                cells += [fmt(q.get("ppl_ratio"), ".2f")] if gen else []
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def family(row) -> str:
    """A curve: ELF's sampler, the students, MDLM, AR with and without its cache."""
    if row["system"] == "ELF":
        return f"ELF {row['setting'].split()[0]}"
    if row["system"] == "AR":
        return "AR " + row["setting"].rsplit(" ", 1)[0]
    return row["system"]


def plot(table: dict, here: str):
    """NAME.png for each run with quality: PPL ratio and MAUVE against seconds per sample."""
    plt = pyplot()
    for e in table["runs"]:
        rows = [r for r in e["rows"] if "quality" in r]
        if not rows:
            continue
        fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex="col", squeeze=False)
        curves = {}
        for r in rows:
            curves.setdefault(family(r), []).append(r)
        for j, (batch, secs) in enumerate(
            ((1, lambda r: r["latency_s"]), (e["context"]["batch"], lambda r: 1 / r["throughput"]))
        ):
            for i, (label, value) in enumerate(
                (
                    ("n-gram PPL / real text's", lambda r: r["quality"]["kn_ppl_ratio"]),
                    ("MAUVE", lambda r: r["quality"]["mauve"]["mean"]),
                )
            ):
                ax = axes[i][j]
                for name, pts in curves.items():
                    pts = sorted(pts, key=secs)
                    ax.plot([secs(p) for p in pts], [value(p) for p in pts], "o-", label=name)
                    for p in pts:  # each point's steps, or the AR's temperature
                        tag = p["setting"].split()[-1]
                        ax.annotate(tag, (secs(p), value(p)), fontsize=7, alpha=0.7)
                ref = e.get("reference", {}).get("real", {})
                ax.axhline(1.0 if i == 0 else ref.get("mauve", 1.0), ls="--", c="gray", lw=0.8)
                ax.set_xscale("log")
                ax.set_yscale("log" if i == 0 else "linear")  # PPL ratios span decades
                ax.set_ylabel(label)
                ax.set_xlabel(f"seconds per sample at batch {batch}")
                ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        L = rows[0]["length"]
        fig.suptitle(f"{e['name']}: quality against cost, {L} tokens ({e['context']['device']})")
        fig.tight_layout()
        fig.savefig(os.path.join(here, e["name"].replace("/", "_") + ".png"), dpi=110)
        plt.close(fig)


@dataclass
class TableConfig:
    """The cost benchmark's table: collect, render, plot."""

    collect: str = ""  # a runs folder: its measure.json files -> table.json
    dir: str = HERE  # where table.json is kept, and table.md and the plots written


def main(argv):
    """[--collect RUNS] [--dir DIR]: DIR (default results/cost) holds table.json, gets the rest."""
    cfg = parse(argv, TableConfig, "results/cost/table.py")
    path = os.path.join(cfg.dir, "table.json")
    if cfg.collect:  # the runs found replace their namesakes; the kept table's others stay
        runs = collect(cfg.collect)["runs"]
        found = {e["name"] for e in runs}
        if os.path.isfile(path):
            runs += [e for e in read_table(path)["runs"] if e["name"] not in found]
        os.makedirs(cfg.dir, exist_ok=True)
        table = {"runs": sorted(runs, key=lambda e: e["name"])}
        atomic_write_text(path, json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no {path}: not yet measured (--collect RUNS)")
    with open(path) as f:
        table = json.load(f)
    with open(os.path.join(cfg.dir, "table.md"), "w") as f:
        f.write(render(table))
    plot(table, cfg.dir)
    print(f"wrote {os.path.join(cfg.dir, 'table.md')}")


if __name__ == "__main__":
    from lib.guard import cli

    cli(main)
