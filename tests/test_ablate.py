"""ablate.py: arms trained per seed, scored under eval arms, aggregated over seeds, resumable."""

import json
import os
import re

import pytest

from baselines import ar
from tests.conftest import ROOT, results_table
from tools import ablate, ablation, ablation_report


def test_arm_parsing():
    assert ablate.parse_arms("x: --prediction x | v: --prediction v --blr 1e-3") == [
        ("x", ["--prediction", "x"]),
        ("v", ["--prediction", "v", "--blr", "1e-3"]),
    ]
    assert ablate.parse_arms("base:") == [("base", [])]
    with pytest.raises(ValueError, match="an arm is 'label: overrides'"):
        ablate.parse_arms("--prediction x")
    with pytest.raises(ValueError, match="repeat"):
        ablate.parse_arms("a: --x 1 | a: --x 2")


def test_a_run_folder_is_named_by_the_values_it_trains(tmp_path):
    """An arm's runs are found again by what they train, not by the base file's bytes: a
    comment edited in the base, or a value given again as it already is, keeps them; a value
    changed in the base, in `common` or in the arm gives other runs; the seed is the suffix."""
    with open(os.path.join(ROOT, "configs", "tiny.py")) as f:
        text = f.read()
    (tmp_path / "a.py").write_text(text)
    (tmp_path / "b.py").write_text("# a comment a fork added\n" + text)
    (tmp_path / "c.py").write_text(text + "\nblr = 0.000123\n")
    at = lambda base, common="", args=(), seed=0: ablate.run_folder(
        ablate.AblateConfig(base=str(tmp_path / base), common=common, runs="r"), list(args), seed
    )
    assert at("a.py") == at("b.py") == at("a.py", "--bottleneck 32") == at("c.py", "--blr 4e-3")
    assert at("a.py").startswith("r/base-") and at("a.py", seed=3) == at("a.py")[:-1] + "3"
    others = {at("c.py"), at("a.py", "--max_steps 7"), at("a.py", "", ["--bottleneck", "16"])}
    assert len(others | {at("a.py")}) == 4
    assert at("a.py", "", ["--bottleneck", "16"]).startswith("r/bottleneck_16-")
    with pytest.raises(ValueError, match="unknown"):  # a misspelt override: before any training
        ablate.main(["--name", "x", "--base", str(tmp_path / "a.py"), "--runs",
                     str(tmp_path / "fresh"), "--common=--max_steps 1 --time_limit_min 0",
                     "--arms", "base: | b: --bottlenek 16"])  # fmt: skip
    assert not (tmp_path / "fresh").exists()  # the base arm was not trained first
    # a run trained under another name (by the base file's bytes, as before) is found by the
    # values its config.json holds, apart from what every run is given (out_dir, seed, ...)
    from dataclasses import asdict

    from lib.config import parse_train

    train = asdict(parse_train([str(tmp_path / "a.py")]))
    for name, blr in (("base-0ld0ld01-s0", 4e-3), ("base-0ld0ld00-s0", 1e-3)):
        (tmp_path / "r" / name).mkdir(parents=True)
        config = {"train": dict(train, blr=blr, out_dir=name, seed=0, n_samples=0, overwrite=True)}
        (tmp_path / "r" / name / "config.json").write_text(json.dumps(config))
    found = ablate.run_folder(
        ablate.AblateConfig(base=str(tmp_path / "a.py"), runs=str(tmp_path / "r")), [], 0
    )
    assert found == str(tmp_path / "r" / "base-0ld0ld01-s0")


def test_the_summary_pairs_each_arm_with_the_first_seed_by_seed():
    """Per (arm, eval arm) the mean over seeds and, against the first arm, the paired 95%
    t-interval with its n; a report without a judge (no Gen. PPL) or from before the instrument
    (no MAUVE) leaves those figures out; one seed prints its figure and n=1, never '± 0'."""

    def report(ppl_ratio, mauve):
        r = {
            "nfe": 3,
            "examples": ["a text"],
            "entropy_ratio": 0.9,
            "repetition": 0.0,
            "copies": 0.0,
            "ngrams_seen": 0.1,
            "ppl": {"mean": 50.0},
            "entropy": {"mean": 2.0},
            "ppl_ratio": ppl_ratio,
            "provenance": {"commit": "abc", "split": "dev"},
            **({"mauve": {"mean": mauve}} if mauve is not None else {}),
        }
        return {
            "default": {
                "results": [r],
                "reference": {"real": {"ppl": {"mean": 40.0}, "entropy": {"mean": 2.1}}},
            }
        }

    losses = {"val_mse": 0.8, "val_ce": 1.3}
    results = {
        ("a", 0): (report(2.0, 0.5), losses),
        ("a", 1): (report(3.0, 0.7), losses),
        ("b", 0): (report(1.0, 0.6), losses),
        ("b", 1): (report(1.5, 0.9), losses),
    }
    arms, eval_arms = [("a", []), ("b", ["--x", "1"])], [("default", [])]
    rows = ablation.summarise(results, arms, eval_arms)
    a, b = rows
    assert "vs_base" not in a and a["ppl_ratio"]["mean"] == 2.5 and a["mauve"]["mean"] == 0.6
    v = b["vs_base"]["ppl_ratio"]  # differences -1.0, -1.5: mean -1.25, se 0.25
    assert v["n"] == 2 and v["diff"] == -1.25
    assert (v["lo"], v["hi"]) == pytest.approx((-1.25 - 12.706 * 0.25, -1.25 + 12.706 * 0.25))
    assert a["provenance"] == [{"commit": "abc", "split": "dev"}]
    md = ablation_report.markdown(
        {
            "name": "t",
            "base": "b.py",
            "common": "",
            "seeds": "0,1",
            "n": 3,
            "eval_seeds": "0",
            "judge": "j",
        },
        rows,
        arms,
        eval_arms,
    )
    assert "| a | default | 2 | 3 | 2.5 ± 0.5 |" in md and "(n=2)" in md and "mauve" in md
    one = {k: v for k, v in results.items() if k[1] == 0}
    one[("b", 0)] = (report(1.0, None), losses)  # an old report: no MAUVE
    rows = ablation.summarise(one, arms, eval_arms)
    assert "mauve" not in rows[1] and "mauve" not in rows[1]["vs_base"]
    md = ablation_report.markdown(
        {
            "name": "t",
            "base": "b.py",
            "common": "",
            "seeds": "0",
            "n": 3,
            "eval_seeds": "0",
            "judge": "j",
        },
        rows,
        arms,
        eval_arms,
    )
    assert "± 0 " not in md and "| b | default | 1 | 3 | 1 |" in md and "-1 (n=1)" in md


def test_arms_are_compared_at_one_diversity_read_off_their_frontiers():
    """Each (arm, seed) frontier is read at the middle of the diversity every run spans, and
    the arms are paired seed by seed there; frontiers that share no diversity give no verdict."""

    def rows(frontiers):  # {arm: {seed: [(distinct-2, PPL ratio) per eval arm]}}
        out = []
        for arm, seeds in frontiers.items():
            for i in range(2):
                per_seed = [
                    {"seed": s, "distinct_2_matched": pts[i][0], "kn_ppl_ratio": pts[i][1]}
                    for s, pts in seeds.items()
                ]
                means = {  # a summarised row: each figure's mean over seeds (s.e. unused)
                    k: {"mean": sum(p[k] for p in per_seed) / len(per_seed), "se": 0.0}
                    for k in ("distinct_2_matched", "kn_ppl_ratio")
                }
                out.append({"arm": arm, "eval_arm": f"e{i}", "per_seed": per_seed, **means})
        return out

    arms = [("a", []), ("b", [])]
    # a: PPL 2 -> 8 as distinct-2 goes 0.8 -> 1.0 (log-linear: 4 at 0.9); b twice a's everywhere
    a = {0: [(0.8, 2.0), (1.0, 8.0)], 1: [(0.7, 2.0), (0.9, 8.0)]}
    b = {s: [(x, 2 * y) for x, y in pts] for s, pts in a.items()}
    m = ablation.at_matched_diversity(rows({"a": a, "b": b}), arms)
    assert (m["x"], m["y"]) == ("distinct_2_matched", "kn_ppl_ratio")
    assert m["range"] == pytest.approx([0.8, 0.9]) and m["at"] == pytest.approx(0.85)
    assert m["arms"]["a"]["per_seed"] == pytest.approx({"0": 2 * 2**0.5, "1": 4 * 2**0.5})
    diff, lo, hi, n = (m["arms"]["b"]["vs_base"][k] for k in ("diff", "lo", "hi", "n"))
    assert n == 2 and diff == pytest.approx(3 * 2**0.5) and lo < diff < hi
    assert "b: " in "\n".join(ablation_report.matched_lines(m, arms))
    far = {0: [(0.95, 1.0), (0.99, 2.0)]}
    apart = ablation.at_matched_diversity(rows({"a": a, "b": far}), arms)
    assert apart["at"] is None and "share no distinct_2_matched" in apart["why"]
    one_point = [r for r in rows({"a": a}) if r["eval_arm"] == "e0"]
    assert ablation.at_matched_diversity(one_point, arms[:1]) == {}
    # three arms: each against the first seed by seed, at the range the seed's two runs span,
    # so an arm whose diversity collapses (c) leaves b comparable
    c = {0: [(0.3, 1.0), (0.4, 1.5)], 1: [(0.3, 1.0), (0.4, 1.5)]}
    three = [("a", []), ("b", []), ("c", [])]
    assert ablation.at_matched_diversity(rows({"a": a, "b": b, "c": c}), three)["at"] is None
    pairs = ablation.matched_pairs(rows({"a": a, "b": b, "c": c}), three)
    seed1 = pairs["b"]["per_seed"][1]  # seed 1 spans [0.7, 0.9] in both: read at 0.8, 4 and 8
    assert (seed1["seed"], seed1["at"]) == (1, pytest.approx(0.8))
    assert (seed1["arm"], seed1["base"]) == (pytest.approx(8.0), pytest.approx(4.0))
    assert pairs["b"]["n"] == 2 and pairs["b"]["diff"] == pytest.approx(4.0)  # 8 - 4 in each
    assert pairs["c"]["per_seed"] == [] and pairs["c"]["unmatched"] == [0, 1]
    text = "\n".join(ablation_report.pair_lines(pairs, three))
    assert (
        "- c (kn_ppl_ratio): no seed shares one; no shared distinct_2_matched: seeds 0, 1" in text
    )
    assert ablation.matched_pairs(rows({"a": a, "b": b}), arms) == {}  # two arms: one reading
    # one sampler setting (a judge's reading of one point): no frontier, so no pairs either
    one_setting = [r for r in rows({"a": a, "b": b, "c": c}) if r["eval_arm"] == "e0"]
    assert ablation.matched_pairs(one_setting, three) == {}
    # and a report of one setting written before that keeps no such reading in a results table
    stale = {"config": {"name": "x"}, "arms": three, "eval_arms": [["ode", ""]], "rows": []}
    stale["matched_pairs"] = {"c": {"per_seed": [], "unmatched": [0, 1]}}
    assert "matched_pairs" not in ablation.kept_entry(stale, ())
    stale["eval_arms"] = [["ode", ""], ["g1", ""]]
    assert ablation.kept_entry(stale, ())["matched_pairs"] == stale["matched_pairs"]


@pytest.mark.slow
def test_an_ablation_end_to_end(tmp_path, jsonl_file):
    """2 arms x 2 seeds x 2 eval arms of a few steps each: the table has one row per (arm,
    eval arm) with the mean over seeds; runs trained first with --score false are scored, not
    trained again; and a second call redoes nothing (~1-2 min)."""
    ar.main(
        [
            "--data",
            jsonl_file,
            "--out",
            str(tmp_path / "judge"),
            "--steps",
            "2",
            "--batch_size",
            "2",
            "--length",
            "16",
            "--vocab",
            "300",
            "--n_layer",
            "1",
            "--n_embd",
            "16",
            "--n_head",
            "2",
        ]
    )
    common = (
        f"--dataset {jsonl_file} --max_length 12 --packing false --pad_token eos "
        f"--batch_size 4 --eval_batches 1 --latent_cache false --warmup_steps 1 "
        f"--eval_interval 100 --cache_dir {tmp_path / 'c'}"
    )
    args = [
        "--name",
        "demo",
        "--arms",
        "two: --max_steps 2 | three: --max_steps 3",
        f"--common={common}",
        "--eval_arms",
        "ode: --sampler ode --steps 2 | sde: --sampler sde --steps 2",
        "--seeds",
        "0,1",
        "--judge",
        str(tmp_path / "judge"),
        "--n",
        "3",
        "--eval_seeds",
        "0",
        "--runs",
        str(tmp_path / "runs"),
        "--out",
        str(tmp_path / "out"),
    ]
    ablate.main([*args, "--score", "false"])  # train only: nothing scored, no report
    trained = {
        p.name: (p / "latest").stat().st_mtime for p in (tmp_path / "runs").iterdir() if p.is_dir()
    }
    assert len(trained) == 4 and not (tmp_path / "out" / "demo").exists()
    assert not list((tmp_path / "runs").glob("*/eval-*"))
    ablate.main(args)  # scores them, training nothing again
    assert trained == {
        p.name: (p / "latest").stat().st_mtime for p in (tmp_path / "runs").iterdir() if p.is_dir()
    }
    rep = json.loads((tmp_path / "out" / "demo" / "report.json").read_text())
    assert [(r["arm"], r["eval_arm"]) for r in rep["rows"]] == [
        ("two", "ode"),
        ("two", "sde"),
        ("three", "ode"),
        ("three", "sde"),
    ]
    row = rep["rows"][0]
    assert [p["seed"] for p in row["per_seed"]] == [0, 1]
    assert row["ppl_ratio"]["mean"] == pytest.approx(
        sum(p["ppl_ratio"] for p in row["per_seed"]) / 2
    )
    runs = {
        p.name.split("-")[0] + "-" + p.name.split("-")[-1]: p
        for p in (tmp_path / "runs").iterdir()
        if p.is_dir()
    }
    assert sorted(runs) == ["max_steps_2-s0", "max_steps_2-s1", "max_steps_3-s0", "max_steps_3-s1"]
    meta = json.loads((runs["max_steps_3-s1"] / "config.json").read_text())
    assert meta["step"] == 3 and meta["train"]["seed"] == 1
    last = [
        json.loads(l) for l in (runs["max_steps_3-s1"] / "metrics.jsonl").read_text().splitlines()
    ]
    last = [r for r in last if "val_mse" in r][-1]  # the run's final validation losses
    assert rep["rows"][2]["per_seed"][1]["val_mse"] == last["val_mse"] and last["step"] == 3
    assert rep["rows"][2]["val_ce"]["mean"] == pytest.approx(
        sum(p["val_ce"] for p in rep["rows"][2]["per_seed"]) / 2
    )
    stamp = (runs["max_steps_2-s0"] / "latest").stat().st_mtime
    ablate.main(args)  # resumable: nothing is redone
    assert (runs["max_steps_2-s0"] / "latest").stat().st_mtime == stamp
    assert (tmp_path / "out" / "demo" / "ablation.png").stat().st_size > 0


def test_the_claims_table_keeps_claims_measured_elsewhere(tmp_path):
    """results/claims/table.py --collect: a claim with a report under the runs folder is read
    from it (the judge's path made portable); one without keeps its entry in the kept
    table.json, in the table's order (claims are measured a few at a time)."""
    table = results_table("claims")
    old_prediction = {"config": {"name": "prediction"}, "arms": [], "eval_arms": [], "rows": []}
    stale = {
        "config": {"name": "bottleneck", "judge": "old"},
        "arms": [],
        "eval_arms": [],
        "rows": [],
    }
    kept = tmp_path / "table.json"
    kept.write_text(json.dumps({"claims": [stale, old_prediction]}))
    (tmp_path / "reports" / "bottleneck").mkdir(parents=True)
    per_seed = [{"seed": s, "ppl_ratio": 2.0 + s, "example": f"text {s}"} for s in (0, 1)]
    report = {
        "config": {"name": "bottleneck", "judge": "/home/u/elf/judges/desc_wiki", "seeds": "0,1"},
        "arms": [["b128", []]],
        "eval_arms": [["default", []]],
        "rows": [
            {
                "arm": "b128",
                "eval_arm": "default",
                "nfe": 32,
                "ppl_ratio": 2.5,
                "per_seed": per_seed,
            }
        ],
    }
    (tmp_path / "reports" / "bottleneck" / "report.json").write_text(json.dumps(report))
    out = table.collect(str(tmp_path / "reports"), kept=str(kept))["claims"]
    assert [c["config"]["name"] for c in out] == ["prediction", "bottleneck"]
    assert out[0] == old_prediction
    assert out[1]["config"]["judge"] == "judges/desc_wiki"
    assert out[1]["rows"][0]["ppl_ratio"] == 2.5
    assert out[1]["rows"][0]["seeds"] == [
        {"seed": 0, "ppl_ratio": 2.0},
        {"seed": 1, "ppl_ratio": 3.0},
    ]


def test_the_instrument_tables_keep_each_seeds_figures_and_the_frontier_plot(tmp_path):
    """tools.ablation.kept_reports, the collect of the instrument's tables (results/bottleneck,
    refinements, headline): each row keeps the instrument's figures of every training seed and
    nothing else of them, the paired differences and provenance; the report's plot is copied
    beside table.json under the ablation's name; and the render reads table.json alone."""
    table = results_table("bottleneck")
    folder = tmp_path / "sweep"
    folder.mkdir()
    seed = lambda s: {
        "seed": s,
        "kn_ppl_ratio": 2.0 + s,
        "mauve": 0.9,
        "val_mse": 0.7,
        "example": "x",
    }
    cfg = {"name": "demo_sweep", "base": "configs/tiny.py", "common": "", "seeds": "0,1"}
    cfg.update(n=64, eval_seeds="0,1,2", judge="")
    report = {
        "config": {**cfg, "runs": "/home/u/runs", "parallel": 2},
        "arms": [["base", []], ["deep9", ["--depth", "9"]]],
        "eval_arms": [["ode32", ["--decompose", "off"]]],
        "rows": [
            {
                "arm": arm,
                "eval_arm": "ode32",
                "nfe": 33,
                "kn_ppl_ratio": {"mean": 2.5, "se": 0.5},
                "per_seed": [seed(0), seed(1)],
                **({"vs_base": {"kn_ppl_ratio": {"diff": 0.1, "n": 1}}} if arm == "deep9" else {}),
                "provenance": {"commit": "abc"},
            }
            for arm in ("base", "deep9")
        ],
    }
    (folder / "report.json").write_text(json.dumps(report))
    (folder / "ablation.png").write_bytes(b"png")
    plots = tmp_path / "kept"
    plots.mkdir()
    keys = (*ablation.INSTRUMENT_SEED, "entropy_ratio")
    (entry,) = ablation.kept_reports([str(folder)], keys, plots)
    assert (plots / "demo_sweep.png").read_bytes() == b"png"
    assert entry["rows"][0]["seeds"] == [
        {"seed": 0, "kn_ppl_ratio": 2.0, "mauve": 0.9},
        {"seed": 1, "kn_ppl_ratio": 3.0, "mauve": 0.9},
    ]
    assert entry["rows"][1]["vs_base"] == {"kn_ppl_ratio": {"diff": 0.1, "n": 1}}
    assert entry["rows"][1]["provenance"] == {"commit": "abc"}
    assert entry["config"] == {k: str(v) for k, v in cfg.items()}  # no machine's paths
    text = table.render({"sweeps": [entry]})
    assert text.startswith("## `demo_sweep`") and "+0.1 (n=1)" in text


@pytest.mark.parametrize(
    "question,key", [("bottleneck", "sweeps"), ("headline", "runs"), ("refinements", "runs")]
)
def test_the_instrument_tables_keep_entries_measured_elsewhere(tmp_path, question, key):
    """results/{bottleneck,headline,refinements}/table.py --collect FOLDER: the entry in FOLDER
    replaces the kept one of its name; a kept entry of another name (measured on another
    machine, its runs not here: the GPT-2 judge's reading added beside it) stays, before it."""
    table = results_table(question)
    old = lambda name: {"config": {"name": name}, "arms": [], "eval_arms": [], "rows": []}
    kept = tmp_path / "table.json"
    kept.write_text(json.dumps({key: [old("narrow"), old("sweep")]}))
    folder = tmp_path / "narrow"
    folder.mkdir()
    report = {
        "config": {"name": "narrow", "seeds": "0"},
        "arms": [["b16", ["--bottleneck", "16"]]],
        "eval_arms": [["ode32", []]],
        "rows": [{"arm": "b16", "eval_arm": "ode32", "nfe": 33, "per_seed": [{"example": "x"}]}],
    }
    (folder / "report.json").write_text(json.dumps(report))
    plots = {} if question == "headline" else {"plots_to": str(tmp_path)}  # never results/
    out = table.collect(str(folder), kept=str(kept), **plots)[key]
    assert [e["config"]["name"] for e in out] == ["sweep", "narrow"]
    assert out[0] == old("sweep") and out[1]["rows"][0]["arm"] == "b16"


def test_a_sweep_continued_on_other_seeds_joins_the_kept_one(tmp_path):
    """results/bottleneck/table.py --collect of a sweep that continues a kept one on other
    seeds (two seeds measured on one machine, three later on another): the joined entry has
    the means, paired intervals and matched readings that one report of all five seeds has;
    collecting it again changes nothing, a seed measured again takes its new figures, a sweep
    of every kept seed keeps all its figures; other settings under the same name replace it."""
    table = results_table("bottleneck")
    arms = [("a", []), ("b", ["--bottleneck", "64"]), ("c", ["--bottleneck", "16"])]
    eval_arms = [("ode", []), ("g1", ["--gamma", "1"])]

    def report(a, seed, e, again=0.0):  # made-up figures: each run and sampler its own
        lift = {"a": 0.0, "b": 0.3, "c": -0.5}[a] + 0.1 * seed * (seed % 3) + again
        r = {
            "nfe": 33,
            "examples": [f"{a} {seed}"],
            "kn_ppl_ratio": 2.0 + lift + e,
            "distinct_2_matched": 0.9 - 0.05 * e + 0.005 * seed + (a == "c") * 0.02 * e,
            "mauve": 0.95 - 0.01 * seed * e,
            "length": 7.0 + 0.1 * seed,
            "copies": 0.0,
            "ngrams_seen": 0.01 * (seed + 1),
            "repetition": 0.02 * seed,
            "provenance": {"cpu": "one" if seed < 2 else "two"},
        }
        return {"results": [r], "reference": {"real": {}}}

    def entry(seeds, again=0.0, per_seed=table.PER_SEED, **config):
        results = {
            (a, s): (
                {lab: report(a, s, i, again) for i, (lab, _) in enumerate(eval_arms)},
                {"val_mse": 0.7 + 0.01 * s, "val_ce": 1.4},
            )
            for a, _ in arms
            for s in seeds
        }
        rows = ablation.summarise(results, arms, eval_arms)
        cfg = {"name": "narrow", "base": "b.py", "common": "", "n": 64, "eval_seeds": "0"}
        rep = {
            "config": {**cfg, "judge": "", "seeds": ",".join(map(str, seeds)), **config},
            "arms": arms,
            "eval_arms": eval_arms,
            "rows": rows,
            "matched": ablation.at_matched_diversity(rows, arms),
            "matched_pairs": ablation.matched_pairs(rows, arms),
        }
        return json.loads(json.dumps(ablation.kept_entry(rep, per_seed)))

    def collect(seeds, kept, again=0.0, **config):
        folder = tmp_path / "reports" / "narrow"
        folder.mkdir(parents=True, exist_ok=True)
        rep = entry(seeds, again, **config)  # a kept entry's rows as a report's: per_seed
        rep["rows"] = [{**r, "per_seed": r.pop("seeds")} for r in rep["rows"]]
        for r in rep["rows"]:
            r["per_seed"][0]["example"] = r["example"]
        (folder / "report.json").write_text(json.dumps(rep))
        table_json = tmp_path / "table.json"
        table_json.write_text(json.dumps({"sweeps": kept}))
        return table.collect(str(folder), kept=str(table_json), plots_to=str(tmp_path))["sweeps"]

    def close(got, want):  # equal to round-off, through nested dicts and lists
        if isinstance(want, dict):
            return got.keys() == want.keys() and all(close(got[k], want[k]) for k in want)
        if isinstance(want, list):
            return len(got) == len(want) and all(map(close, got, want))
        return got == pytest.approx(want) if isinstance(want, float) else got == want

    (joined,) = collect([2, 3, 4], [entry([0, 1])])
    every = entry([0, 1, 2, 3, 4])
    assert joined["config"] == every["config"] and (tmp_path / "narrow.png").exists()
    for got, want in zip(joined["rows"], every["rows"]):
        assert got["seeds"] == want["seeds"]
        drop = lambda r: {k: v for k, v in r.items() if k != "provenance"}
        assert close(drop(got), drop(want))
        assert got["provenance"] == [{"cpu": "one"}, {"cpu": "two"}]
    assert close(joined["matched"], every["matched"]) and joined["matched"]["at"] is not None
    assert close(joined["matched_pairs"], every["matched_pairs"])
    assert joined["matched_pairs"]["b"]["n"] == 5
    (again,) = collect([2, 3, 4], [joined])
    assert again == joined
    (redone,) = collect([2], [joined], again=0.5)  # seed 2 measured again: its new figures
    seed2 = next(p for p in redone["rows"][0]["seeds"] if p["seed"] == 2)
    assert seed2["kn_ppl_ratio"] == pytest.approx(2.0 + 0.4 + 0.5)
    assert redone["rows"][0]["kn_ppl_ratio"]["mean"] == pytest.approx(
        joined["rows"][0]["kn_ppl_ratio"]["mean"] + 0.5 / 5
    )
    (older,) = collect([2, 3, 4], [entry([0, 1], per_seed=ablation.INSTRUMENT_SEED)])
    assert "val_mse" not in older["rows"][0]  # seeds kept without their losses: no mean of 5
    assert older["rows"][0]["kn_ppl_ratio"] == joined["rows"][0]["kn_ppl_ratio"]
    (whole,) = collect([0, 1, 2, 3, 4], [older])  # every seed again: all its figures
    assert whole["rows"][0]["val_mse"]["mean"] == pytest.approx(0.72)
    (other,) = collect([2, 3, 4], [joined], common="--max_steps 10")
    assert other["config"]["seeds"] == "2,3,4"


def test_every_claim_of_run_sh_has_its_place_in_the_claims_table():
    """results/claims/run.sh defines each claim ([name]=...) and runs them in ORDER; table.py
    collects the reports in its own ORDER. A claim missing from either is measured and then
    dropped from table.json (or never run by a plain `bash run.sh`)."""
    with open(os.path.join(ROOT, "results", "claims", "run.sh")) as f:
        text = f.read()
    defined = re.findall(r"^\s+\[(\w+)\]=", text, re.M)
    order = re.search(r"^ORDER=\(([^)]*)\)", text, re.M).group(1).split()
    assert len(defined) == len(set(defined)) and sorted(defined) == sorted(order)
    assert order == list(results_table("claims").ORDER)


def test_the_memorisation_table_names_when_a_model_starts_to_copy():
    """results/memorisation/table.py: a model 'starts to copy' at the first minutes at which its
    copies exceed real held-out text's by more than two standard errors; the table renders a
    point with every sample a copy (no Gen. PPL of the non-copies) as '-'."""
    table = results_table("memorisation")
    score = lambda m, se=0.0: {"mean": m, "se": se}
    row = lambda model, minutes, copies, se, novel: {
        "model": model,
        "minutes": minutes,
        "steps": 10,
        "passes": 1.0,
        "copies": score(copies, se),
        "ngrams_seen": score(0.5),
        "ppl": score(60.0),
        "ppl_novel": score(novel),
        "entropy": score(2.0),
        "repetition": score(0.0),
        "ppl_ratio": 1.0,
        "ppl_novel_ratio": novel / 50,
        "entropy_ratio": 1.0,
        "example": "a | b",
    }
    t = {
        "judge": "j",
        "n": 64,
        "seeds": [0, 1, 2],
        "real": {"ppl": 60.0, "ppl_novel": 50.0, "copies": 0.1, "entropy": 2.0},
        "rows": [
            row("elf", 1, 0.3, 0.15, 70.0),
            row("elf", 2, 0.3, 0.05, 70.0),
            row("ar", 1, 0.05, 0.0, 90.0),
            row("ar", 20, 1.0, 0.0, float("nan")),
        ],
    }
    assert table.starts_to_copy(t, "elf") == 2  # at 1 minute 0.3 - 2 x 0.15 is not above 0.1
    assert table.starts_to_copy(t, "ar") == 20 and table.starts_to_copy(t, "mdlm") is None
    md = table.render(t)
    assert "| AR | 20 | 10 | 1.0 | 1.000 ± 0.000 | 0.500 ± 0.000 | 1.00 | - |" in md
    assert "a / b" in md and "ELF: copies more than real text from 2 minutes" in md
