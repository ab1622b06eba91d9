"""An ablation's report.md and plot, from its summarised rows (tools/ablation.py): the
yardstick per (arm, eval arm), the instrument's figures, the paired differences, the arms at
matched diversity, the error decomposition; results/*/table.py render their kept entries with
render_entries and gather theirs with kept_and_new (a joined sweep's plot redrawn with draw).
No command: tools/ablate.py writes them."""

import os

from tools.ablation import DECOMPOSITION, INSTRUMENT, YARDSTICK, axes, join_seeds, kept_reports


def kept_and_new(kept: list, folders, per_seed_keys, plots_to: str) -> list:
    """A results table's entries: the kept ones (kept_entry) of names not given, then each
    tools.ablate report folder's in the order given (with plots_to, its plot copied there as
    <name>.png). A report with the arms and settings of a kept entry of its name joins it seed
    by seed (join_seeds: a sweep continued on other seeds, on another day, adds them; a seed
    given again takes the new figures; the plot redrawn over every seed); one of that name with
    other settings replaces it. The runs of a kept entry need not be on this machine."""
    entries = list(kept)
    for e in kept_reports(folders, per_seed_keys, plots_to):
        name = e["config"]["name"]
        old = next((b for b in entries if b["config"]["name"] == name), None)
        entries = [b for b in entries if b is not old]
        try:
            joined = join_seeds(old, e) if old else e
        except ValueError as why:  # the same name, other settings: it replaces the kept one
            print(f"{why}: it replaces the kept entry")
            joined = e
        if joined is not e:
            print(f"{name}: seeds {e['config']['seeds']} joined the kept ones")
        if joined is not e and plots_to:
            draw(
                joined["rows"],
                joined["arms"],
                joined["eval_arms"],
                joined.get("matched") or {},
                name,
                os.path.join(plots_to, f"{name}.png"),
            )
        entries.append(joined)
    return entries


def markdown(cfg: dict, rows, arms, eval_arms, matched=None, pairs=None) -> str:
    """An ablation's report.md: the yardstick per (arm, eval arm), the arms at matched diversity
    (at_matched_diversity), then the decomposition; cfg holds AblateConfig's fields
    (results/claims/table.py renders its kept table with it)."""
    common = f" {cfg['common']}" if cfg["common"] else ""
    lines = [
        f"Ablation `{cfg['name']}`: base `{cfg['base']}`{common}; training seeds "
        f"{cfg['seeds']}; each run scored with {cfg['n']} samples x evaluation seeds "
        f"{cfg['eval_seeds']} by `{cfg['judge']}`; mean ± standard error over the n training "
        "seeds.",
        "",
        "| arm | eval | n | NFE | Gen. PPL / real | entropy / real | repetition | "
        "copies | n-grams seen | val MSE (v) | val CE | example |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['arm']} | {r['eval_arm']} | {n_of(r)} | {r['nfe']} | "
        + " | ".join(figure(r, k) for k in YARDSTICK)
        + f" | {r['per_seed'][0]['example'] if 'per_seed' in r else r['example']} |"
        for r in rows
    ]
    if any(k in r for r in rows for k in INSTRUMENT):  # evaluations of the instrument's time
        lines += [
            "",
            "Diversity at a matched size, MAUVE against held-out text, the n-gram "
            "judge's PPL over real text's, length in encoder tokens:",
            "",
            "| arm | eval | n | " + " | ".join(INSTRUMENT) + " |",
            "|---|---|---|" + "---|" * len(INSTRUMENT),
        ]
        lines += [
            f"| {r['arm']} | {r['eval_arm']} | {n_of(r)} | "
            + " | ".join(figure(r, k) for k in INSTRUMENT)
            + " |"
            for r in rows
        ]
    if any("vs_base" in r for r in rows):
        lines += [
            "",
            f"Each arm minus `{arms[0][0]}`, paired by training seed: mean difference "
            "[95% t-interval] (n pairs; one pair: no interval):",
            "",
        ]
        for r in rows:
            lines += (
                [
                    f"- {r['arm']} / {r['eval_arm']}: "
                    + "; ".join(
                        f"{k} {paired(v)}"
                        for k, v in r["vs_base"].items()
                        if k in ("ppl_ratio", *INSTRUMENT)
                    )
                ]
                if r.get("vs_base")
                else []
            )
    lines += matched_lines(matched or {}, arms)
    lines += pair_lines(pairs or {}, arms)
    decomp = [k for k in DECOMPOSITION if all(k in r for r in rows)]
    if decomp:  # where each arm's error comes from (decompose.py)
        lines += [
            "",
            "The error decomposition (decoder on clean latents, nearest-latent ceiling, "
            "round trips from t0, neighbouring x_hat's cosine at the first step, end points' "
            "cosine to a training latent):",
            "",
            "| arm | eval | " + " | ".join(decomp) + " |",
            "|---|---|" + "---|" * len(decomp),
        ]
        lines += [
            f"| {r['arm']} | {r['eval_arm']} | " + " | ".join(figure(r, k) for k in decomp) + " |"
            for r in rows
        ]
    lines += [
        "",
        "Arms: " + "; ".join(f"`{a}`: `{' '.join(x) or '(base)'}`" for a, x in arms),
        "Eval arms: "
        + "; ".join(f"`{a}`: `{' '.join(x) or '(the run preset)'}`" for a, x in eval_arms),
    ]
    return "\n".join(lines) + "\n"


def matched_lines(m: dict, arms) -> list:
    """The arms read off their frontiers at one diversity, each against the first arm."""
    if not m:
        return []
    if m["at"] is None:
        return ["", f"At matched diversity: no verdict, {m['why']}."]
    lo, hi = m["range"]
    lines = [
        "",
        f"At matched diversity: {m['y']} read off each run's frontier (its eval arms) at "
        f"{m['x']} = {m['at']:.3g}, the middle of the range every run spans "
        f"[{lo:.3g}, {hi:.3g}]; mean ± s.e. over training seeds, and the paired difference "
        f"from `{arms[0][0]}` [95% t-interval]:",
        "",
    ]
    for a, v in m["arms"].items():
        fig = f"{v['mean']:.3g}" if v["n"] == 1 else f"{v['mean']:.3g} ± {v['se']:.2g}"
        vs = f"; minus `{arms[0][0]}`: {paired(v['vs_base'])}" if "vs_base" in v else ""
        lines.append(f"- {a}: {fig} (n={v['n']}){vs}")
    return lines


def pair_lines(pairs: dict, arms) -> list:
    """matched_pairs in words: each arm minus the first, seed by seed at a shared diversity."""
    if not pairs:
        return []
    base = arms[0][0]
    lines = [
        "",
        f"Each arm against `{base}` at matched diversity, seed by seed: a training seed's two "
        "runs read off their own frontiers at the middle of the diversity range both span; the "
        "paired difference over the seeds that share one [95% t-interval]:",
        "",
    ]
    for arm, m in pairs.items():
        seeds = ", ".join(
            f"seed {p['seed']} at {p['at']:.3g}: {p['arm']:.3g} against {p['base']:.3g}"
            for p in m["per_seed"]
        )
        none = f"; no shared {m['x']}: seeds {', '.join(map(str, m['unmatched']))}"
        line = f"- {arm} ({m['y']}): " + (seeds or "no seed shares one")
        line += none if m["unmatched"] else ""
        if m["per_seed"]:
            line += f"; minus `{base}`: {paired(m)}"
        lines.append(line)
    return lines


def figure(r, k) -> str:
    """A row's figure k: mean ± standard error over its training seeds; never "± 0": one seed
    has no spread (its figure alone, n is the table's column), and seeds that all agree say so."""
    if k not in r:
        return "-"
    n, mean, se = n_of(r), r[k]["mean"], r[k]["se"]
    if n == 1:
        return f"{mean:.3g}"
    return f"{mean:.3g} (all {n} equal)" if se == 0 else f"{mean:.3g} ± {se:.2g}"


def n_of(r) -> int:
    """A row's training seeds (a kept table's row lists them under 'seeds')."""
    return len(r.get("per_seed") or r.get("seeds") or ())


def paired(v) -> str:
    """A paired difference with its interval and n (n=1: the difference alone)."""
    if v["n"] == 1:
        return f"{v['diff']:+.3g} (n=1)"
    return f"{v['diff']:+.3g} [{v['lo']:+.3g}, {v['hi']:+.3g}] (n={v['n']})"


def render_entries(entries) -> str:
    """Kept entries (kept_entry) as one markdown document: a section per ablation."""
    return "\n".join(
        f"## `{c['config']['name']}`\n\n"
        + markdown(
            c["config"],
            c["rows"],
            c["arms"],
            c["eval_arms"],
            c.get("matched"),
            c.get("matched_pairs"),
        )
        for c in entries
    )


def draw(rows, arms, eval_arms, matched, name: str, path: str):
    """The ablation's plot: one curve per arm through its eval arms, the frontier's axes
    (axes), the matched diversity marked; rows summarised or kept (kept_entry) alike."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    xk, yk = axes(rows)
    for arm, _ in arms:  # one curve per arm through its eval arms, in the order of x
        mine = sorted((r for r in rows if r["arm"] == arm), key=lambda r: r[xk]["mean"])
        xs, ys = [r[xk]["mean"] for r in mine], [r[yk]["mean"] for r in mine]
        ax.errorbar(
            xs,
            ys,
            xerr=[r[xk]["se"] for r in mine],
            yerr=[r[yk]["se"] for r in mine],
            fmt="o-" if len(mine) > 1 else "o",
            capsize=2,
            label=arm,
        )
        for r in mine:
            label = r["arm"] if len(eval_arms) == 1 else r["eval_arm"]
            ax.annotate(label, (r[xk]["mean"], r[yk]["mean"]), fontsize=7)
    if matched.get("at") is not None:
        ax.axvline(matched["at"], color="grey", ls=":", lw=0.8, label="matched diversity")
    if xk == "entropy_ratio":
        ax.plot(1, 1, "*", color="k", markersize=10, label="real text")
    else:
        ax.axhline(1, color="k", lw=0.8, label="real text's PPL")
    ax.set(
        xlabel=(
            "entropy / real text's" if xk == "entropy_ratio" else "distinct-2 at a matched size"
        )
        + " (higher: more diverse)",
        ylabel=("Gen. PPL" if yk == "ppl_ratio" else "n-gram judge PPL")
        + " / real text's (lower: better)",
        yscale="log",
        title=f"ablation: {name}",
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
