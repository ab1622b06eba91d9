"""Claim 9 with its control (results/distill_control/README.md): the teacher, each distilled
student and each control round (the same rounds on the teacher's own loss) at 1, 2, 4 and 8
Euler steps, for one or more teachers (training seeds of the default), from the reports that
`python evaluate.py --distill ... --control ...` writes.

    python results/distill_control/table.py             # table.md from the kept table.json
    python results/distill_control/table.py --collect \
        runs/distill_control/eval [runs/distill_control/s2/eval ...]   # table.json, then table.md

collect keeps each teacher's rows (mean and standard error over the sampling seeds, and each
seed's) with its report's provenance, and joins the kept table's teachers that the reports do
not hold (a teacher scored on another day; a teacher given again takes its new figures). render
writes table.md from table.json alone, so the table rebuilds byte for byte. Each step count is
read where it was trained: round k's student and its control round (spans 1/16 ... 1: round 5
is the 1-step student, round 2 the 8-step one) against the teacher. Across teachers, each
teacher's figure is its mean over the sampling seeds and differences are paired by teacher
(the verdict's intervals); within one teacher they are paired by sampling seed.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.metrics import mean_se
from lib.report import paired_by_key, provenance_sentence, pyplot, read_table, table_command

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ("kn_ppl", "distinct_2_matched", "mauve", "length", "copies")
ROUND_OF_STEPS = {1: "round5", 2: "round4", 4: "round3", 8: "round2", 16: "round1"}
SAME = ("n", "seeds", "split")  # what teachers joined in one table must share


def one_teacher(root):
    """One evaluate.py --distill report as a teacher's entry; Gen. PPL ('ppl') where it was
    scored with the GPT-2 judge."""
    with open(os.path.join(root, "report.json")) as f:
        rep = json.load(f)
    figures = FIGURES + (("ppl",) if rep.get("judge") else ())
    return {
        "teacher_seed": rep["teacher_seed"],
        **{k: rep[k] for k in SAME},
        "provenance": rep["provenance"],
        "real": {k: rep["real"][k]["mean"] for k in figures},
        "rows": [
            {
                "model": r["model"],
                "steps": r["steps"],
                "traj_err": r["traj_err"],
                **{k: {"mean": r[k]["mean"], "se": r[k]["se"]} for k in figures},
                "per_seed": [{k: p[k] for k in ("seed", *figures)} for p in r["per_seed"]],
                "example": r["example"],
            }
            for r in rep["rows"]
        ],
    }


def collect(*roots):
    teachers, first = {}, None
    for root in roots:
        t = one_teacher(root)
        first = first or t
        if t["teacher_seed"] in teachers:
            raise ValueError(f"two reports of teacher seed {t['teacher_seed']} ({root})")
        if any(t[k] != first[k] for k in SAME):
            raise ValueError(f"{root} is scored otherwise than {roots[0]} ({settings(t)})")
        teachers[t["teacher_seed"]] = t
    path = os.path.join(HERE, "table.json")
    if os.path.isfile(path):  # the kept teachers these reports do not hold
        for t in read_table(path)["teachers"]:
            if any(t[k] != first[k] for k in SAME):
                raise ValueError(
                    f"{path} holds teachers scored otherwise ({settings(t)}): "
                    "move it away to start a new table"
                )
            teachers.setdefault(t["teacher_seed"], t)
    table = {"teachers": [teachers[s] for s in sorted(teachers)]}
    plot(table, os.path.join(HERE, "distill_control.png"))
    return table


def settings(t) -> str:
    return ", ".join(f"{k} {t[k]}" for k in SAME)


def teacher_figure(t, model, steps, key):
    """One teacher's figure of a model at a step count, its mean over the sampling seeds (the
    n-gram PPL over real text's); None where it was not scored."""
    r = next((r for r in t["rows"] if (r["model"], r["steps"]) == (model, steps)), None)
    if r is None or key not in r:
        return None
    value = r[key] if key == "traj_err" else r[key]["mean"]
    return value / t["real"]["kn_ppl"] if key == "kn_ppl" else value


def across(teachers, model, steps, key):
    """{teacher seed: figure} over the teachers that have it."""
    out = {t["teacher_seed"]: teacher_figure(t, model, steps, key) for t in teachers}
    return {s: v for s, v in out.items() if v is not None}


SERIES = (
    ("teacher", lambda n: "teacher"),
    ("student", lambda n: ROUND_OF_STEPS[n]),
    ("control", lambda n: "control/" + ROUND_OF_STEPS[n]),
)


def plot(t, path):
    """n-gram PPL / real and MAUVE (and Gen. PPL where the GPT-2 judge scored every teacher)
    against steps, mean ± s.e. over the teachers: the teacher, the round trained for each step
    count, and its control round."""
    plt = pyplot()
    teachers = t["teachers"]
    steps = [n for n in ROUND_OF_STEPS if across(teachers, ROUND_OF_STEPS[n], n, "kn_ppl")]
    keys = [("kn_ppl", "n-gram PPL / real text's (lower)"), ("mauve", "MAUVE (higher)")]
    if all("ppl" in x["real"] for x in teachers):
        keys.append(("ppl", "Gen. PPL, GPT-2 judge (lower)"))
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.8))
    for label, model in SERIES:
        for ax, (key, ylabel) in zip(axes, keys):
            got = [(n, list(across(teachers, model(n), n, key).values())) for n in steps]
            got = [(n, mean_se(v)) for n, v in got if v]  # (a teacher scored without control)
            if got:
                xs, ms = zip(*got)
                ax.errorbar(xs, *zip(*ms), fmt="o-", capsize=2, label=label)
            ax.set(xscale="log", xlabel="Euler steps", ylabel=ylabel)
            ax.set_xticks(steps, [str(n) for n in steps], minor=False)
            ax.minorticks_off()
    spread = "mean ± s.e." if len(teachers) > 1 else "no spread"
    axes[0].set_title(f"{len(teachers)} teacher(s), {spread}", fontsize=9)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fmt(key, v):
    return f"{v:.2f}x" if key == "kn_ppl" else f"{v:.1f}" if key == "ppl" else f"{v:.3f}"


def over_teachers(teachers, model, steps, key):
    """mean ± s.e. over the teachers (n shown where it is fewer than the table's)."""
    vals = across(teachers, model, steps, key)
    if not vals:
        return "-"
    m, se = mean_se(list(vals.values()))
    n = "" if len(vals) == len(teachers) else f" (n={len(vals)})"
    spread = "" if len(vals) == 1 else " ± " + fmt(key, se).rstrip("x")
    return fmt(key, m) + spread + n


def paired(a, b, scale=1.0, digits=2):
    """a - b paired by key (lib.report.paired_by_key), '-' where no key is shared."""
    return paired_by_key(a, b, scale, digits) or "-"


def teacher_lines(teachers):
    """The verdict's table: each step count, the teacher, the student trained for it and its
    control, over the teachers, with student - control and student - teacher paired by teacher."""
    keys = ("traj_err", "kn_ppl", "mauve", "distinct_2_matched", "ppl")
    lines = [
        "| steps | model | trajectory error | n-gram PPL / real | MAUVE | distinct-2 | Gen. PPL | "
        "student - control: n-gram | student - teacher: n-gram | student - control: MAUVE | "
        "student - control: Gen. PPL |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, k in ROUND_OF_STEPS.items():
        if not across(teachers, k, n, "kn_ppl"):
            continue
        for label, model in SERIES:
            if not across(teachers, model(n), n, "kn_ppl"):  # no teacher scored a control
                continue
            vs = ["", "", "", ""]
            if label == "student":
                fig = {
                    key: {m(n): across(teachers, m(n), n, key) for _, m in SERIES} for key in keys
                }
                vs = [
                    paired(fig["kn_ppl"][k], fig["kn_ppl"][f"control/{k}"]),
                    paired(fig["kn_ppl"][k], fig["kn_ppl"]["teacher"]),
                    paired(fig["mauve"][k], fig["mauve"][f"control/{k}"], digits=3),
                    paired(fig["ppl"][k], fig["ppl"][f"control/{k}"], digits=1),
                ]
            cells = [over_teachers(teachers, model(n), n, key) for key in keys]
            lines.append(f"| {n} | {label} | " + " | ".join(cells + vs) + " |")
    return lines


def cell(r, k, real=None):
    if k == "kn_ppl":  # over real text's
        return f"{r[k]['mean'] / real:.2f}x ± {r[k]['se'] / real:.2f}"
    return f"{r[k]['mean']:.3f} ± {r[k]['se']:.3f}"


def versus(a, b, real, key="kn_ppl") -> str:
    """a minus b on the n-gram PPL ratio (or MAUVE), paired by sampling seed: [95% t-interval]
    (n)."""
    scale = real if key == "kn_ppl" else 1.0
    x = {p["seed"]: p[key] for p in a["per_seed"]}
    y = {p["seed"]: p[key] for p in b["per_seed"]}
    return paired(x, y, scale)


def one_teacher_lines(t):
    """One teacher's tables: each step count against the round trained for it (differences
    paired by sampling seed), then every model at every step count."""
    real = t["real"]["kn_ppl"]
    rows = {(r["model"], r["steps"]): r for r in t["rows"]}
    head = "| model | trajectory error | n-gram PPL / real | distinct-2 | MAUVE |"
    lines = [
        f"## Teacher seed {t['teacher_seed']}",
        "",
        f"Real text: n-gram PPL {real:.1f}, distinct-2 {t['real']['distinct_2_matched']:.3f}, "
        f"MAUVE {t['real']['mauve']:.3f}"
        + (f", Gen. PPL {t['real']['ppl']:.1f}" if "ppl" in t["real"] else "")
        + f". {provenance_sentence(t['provenance'])} Judges: n-gram "
        f"{t['provenance']['second_judge']}, GPT-2 {t['provenance']['judge'] or 'none'}.",
        "",
        "| steps | "
        + head[2:]
        + " student - control: n-gram PPL / real | student - teacher: n-gram | "
        + "student - control: MAUVE |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, k in ROUND_OF_STEPS.items():
        if ("teacher", n) not in rows or (k, n) not in rows:
            continue
        trio = [("teacher", rows[("teacher", n)]), (k, rows[(k, n)])]
        trio += [(f"control/{k}", rows[(f"control/{k}", n)])] if (f"control/{k}", n) in rows else []
        for name, r in trio:
            vs = ["", "", ""]
            if name == k:
                c = rows.get((f"control/{k}", n))
                vs = [
                    versus(r, c, real) if c else "-",
                    versus(r, trio[0][1], real),
                    versus(r, c, real, "mauve") if c else "-",
                ]
            lines.append(
                f"| {n} | {name} | {r['traj_err']:.3f} | {cell(r, 'kn_ppl', real)} | "
                f"{cell(r, 'distinct_2_matched')} | {cell(r, 'mauve')} | " + " | ".join(vs) + " |"
            )
    judged = "ppl" in t["real"]  # Gen. PPL where the GPT-2 judge scored this teacher
    lines += ["", "Every model at every step count:", ""]
    lines += [
        "| model | steps" + head[7:] + (" Gen. PPL |" if judged else "") + " example |",
        "|---|---|---|---|---|---|" + ("---|" if judged else "") + "---|",
    ]
    lines += [
        f"| {r['model']} | {r['steps']} | {r['traj_err']:.3f} | {cell(r, 'kn_ppl', real)} | "
        f"{cell(r, 'distinct_2_matched')} | {cell(r, 'mauve')} | "
        + (f"{r['ppl']['mean']:.1f} ± {r['ppl']['se']:.1f} | " if judged else "")
        + f"{r['example']} |"
        for r in t["rows"]
    ]
    return lines


def render(t):
    teachers = t["teachers"]
    first = teachers[0]
    lines = [
        f"Split `{first['split']}`, {first['n']} samples x sampling seeds {first['seeds']}, Euler "
        f"ODE on the uniform grid. Teachers: the default at its 2150 steps, training seeds "
        f"{', '.join(str(x['teacher_seed']) for x in teachers)}.",
        "",
        f"## Each step count against the round trained for it, over {len(teachers)} teachers",
        "",
        "Mean ± s.e. over the teachers (each teacher's figure its mean over the sampling seeds); "
        "differences paired by teacher, [95% t-interval] (n). Gen. PPL where the GPT-2 judge "
        "scored the teacher's rows.",
        "",
        *teacher_lines(teachers),
    ]
    for x in teachers:
        lines += ["", *one_teacher_lines(x)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/distill_control/eval")
