"""results/cost/: the cost benchmark's driver (measure.py) end to end on tiny checkpoints made
here (an untrained ELF and its 'student', MDLM and AR trained for 2 steps), in cost-only mode on
random weights and with quality; the table script rebuilds table.md from table.json byte for
byte and draws the quality-against-seconds plots.

    OMP_NUM_THREADS=1 python -m pytest -q tests/test_cost.py
"""

import dataclasses
import importlib.util
import json
import os

import pytest
import torch

from baselines import ar, mdlm
from flow import FlowConfig
from lib import checkpoint
from lib.config import TrainConfig
from model import ELF, ELFConfig
from tests.conftest import ROOT, results_table

WORDS = "river mountain city king queen ship star forest island bridge".split()
L = 12  # tokens a sample: every system's rows


def driver():
    spec = importlib.util.spec_from_file_location(
        "cost_measure", os.path.join(ROOT, "results", "cost", "measure.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{elf, distill, mdlm, ar}: folders of tiny systems over 60 short documents."""
    d = tmp_path_factory.mktemp("cost")
    docs = d / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"text": f"the {WORDS[i % 10]} of number {i} and the {WORDS[(i * 3) % 10]}"})
            + "\n"
            for i in range(60)
        )
    )
    torch.manual_seed(0)
    cfg = ELFConfig(
        latent_dim=384, vocab_size=30522, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=L
    )
    train = TrainConfig(
        dataset=str(docs),
        encoder="minilm",
        max_length=L,
        packing=False,
        pad_token="eos",
        latent_mean=0.0,
        latent_std=0.3,
        cache_dir=str(d / "cache"),
    )
    meta = {
        "train": dataclasses.asdict(train),
        "model": dataclasses.asdict(cfg),
        "flow": dataclasses.asdict(FlowConfig(self_cond_prob=0.0)),
        "latent_stats": {"mean": 0.0, "std": 0.3},
    }
    checkpoint.save(str(d / "elf"), ELF(cfg), ELF(cfg), None, 0, meta)
    for k in (1, 2):  # the driver samples the last round
        checkpoint.save(str(d / "distill" / f"round{k}"), ELF(cfg), ELF(cfg), None, 0, meta)
    mdlm.main(
        [
            "configs/mdlm_tiny.py",
            f"--dataset={docs}",
            f"--out_dir={d / 'mdlm'}",
            f"--cache_dir={d / 'cache'}",
            f"--max_length={L}",
            *("--depth=1", "--hidden=32", "--heads=2", "--batch_size=4", "--max_steps=2"),
            *("--eval_batches=1", "--warmup_steps=1", "--time_limit_min=0", "--n_samples=0"),
        ]
    )
    ar.main(
        [
            "configs/ar_tiny.py",
            f"--data={docs}",
            f"--out={d / 'ar'}",
            *("--steps=2", "--batch_size=2", "--length=16", "--n_layer=1", "--n_embd=16"),
            *("--n_head=2", "--n_samples=0", "--time_limit_min=0"),
        ]
    )
    return {k: str(d / k) for k in ("elf", "distill", "mdlm", "ar")}


FEW = [  # a few settings of each kind, 3 samples a seed
    *("--elf_ode=1,2", "--elf_heun=2", "--elf_sde=2", "--distill_steps=1", "--mdlm_steps=2,4"),
    *("--ar_temperatures=0.7,1.0", "--ar_no_cache=1.0", "--n=3", "--batch=3", "--seeds=0,1"),
    "--latency_repeats=2",
]


def test_with_quality_then_the_table_and_plots(runs, tmp_path):
    m = driver()
    out = tmp_path / "runs" / "desc"
    args = [*(f"--{k}={v}" for k, v in runs.items()), f"--length={L}", f"--out={out}"]
    rep = m.main([*args, *FEW, "--split=all", "--device=cpu"])
    rows = {(r["system"], r["setting"]): r for r in rep["rows"]}
    assert list(rows) == [
        ("ELF", "ode 1"),
        ("ELF", "ode 2"),
        ("ELF", "heun 2"),
        ("ELF", "sde 2"),
        ("ELF distilled", "fewstep 1"),
        ("MDLM", "mdlm 2"),
        ("MDLM", "mdlm 4"),
        ("AR", "cache T=0.7"),
        ("AR", "cache T=1"),
        ("AR", "no cache T=1"),
    ]
    assert rows["ELF", "ode 2"]["nfe"] == 3 and rows["ELF", "heun 2"]["nfe"] == 4
    assert 1 <= rows["MDLM", "mdlm 4"]["nfe"] <= 4 and 1 <= rows["AR", "cache T=1"]["nfe"] <= L
    for r in rows.values():
        assert r["latency_s"] > 0 and r["throughput"] > 0 and len(r["latency_all_s"]) == 2
        assert r["peak_b1_mb"] is not None and r["weights_mb"] > 0 and len(r["batch_s"]) == 2
        q = r["quality"]
        assert q["kn_ppl_ratio"] > 0 and 0 <= q["mauve"]["mean"] <= 1 and "ppl" not in q
        assert {"distinct_2_matched", "length", "copies"} <= set(q)
    assert rep["reference"]["matched_size"] == 3 and rep["context"]["length"] == L
    # a rerun keeps what was measured; other settings are refused
    again = m.main([*args, *FEW, "--split=all", "--device=cpu"])
    assert again["rows"] == json.loads((out / "measure.json").read_text())["rows"]
    assert [r["latency_all_s"] for r in again["rows"]] == [r["latency_all_s"] for r in rep["rows"]]
    with pytest.raises(ValueError, match="other settings"):
        m.main([*args, *FEW, "--split=all", "--device=cpu", "--n=2"])
    table = results_table("cost")
    here = tmp_path / "results"
    table.main(["--collect", str(tmp_path / "runs"), "--dir", str(here)])
    md = (here / "table.md").read_bytes()
    kept = json.loads((here / "table.json").read_text())
    assert [e["name"] for e in kept["runs"]] == ["desc"]
    table.main(["--dir", str(here)])  # from the kept table.json alone
    assert (here / "table.md").read_bytes() == md
    assert b"| ELF | ode 2 | 3.0 |" in md and b"no cache T=1" in md
    assert (here / "desc.png").stat().st_size > 0
    # another length measured later joins the kept table; a wrong folder changes nothing
    import shutil

    shutil.copytree(tmp_path / "runs" / "desc", tmp_path / "later" / "para")
    table.main(["--collect", str(tmp_path / "later"), "--dir", str(here)])
    assert [e["name"] for e in json.loads((here / "table.json").read_text())["runs"]] == [
        "desc",
        "para",
    ]
    kept = (here / "table.json").read_bytes()
    with pytest.raises(FileNotFoundError, match="no measure.json under"):
        table.main(["--collect", str(tmp_path / "nosuch"), "--dir", str(here)])
    assert (here / "table.json").read_bytes() == kept


def test_cost_only_on_random_weights(tmp_path):
    """--cost_only: random weights of the test shape at two lengths, no quality (the compiled
    path: tools/gpu_check.py's cost stage, tests/test_distributed.py)."""
    m = driver()
    rep = m.main(
        [
            "--cost_only",
            "--shape=test",
            "--lengths=8,16",
            f"--out={tmp_path}",
            *("--elf_ode=2", "--elf_heun=", "--elf_sde=", "--mdlm_steps=4"),
            *("--ar_temperatures=1.0", "--ar_no_cache=", "--n=4", "--batch=4"),
            *("--seeds=0", "--latency_repeats=1"),
        ]
    )
    got = [(r["length"], r["system"], r["setting"]) for r in rep["rows"]]
    kinds = (("ELF", "ode 2"), ("MDLM", "mdlm 4"), ("AR", "cache T=1"))
    assert got == [(n, s, k) for n in (8, 16) for s, k in kinds]
    for r in rep["rows"]:
        assert "quality" not in r and r["throughput"] > 0 and r["first_s"] > 0
    # a random AR rarely draws EOS: every row runs its full length
    assert [r["nfe"] for r in rep["rows"] if r["system"] == "AR"] == [7, 15]


def test_the_frontier_table_reads_each_curve_at_a_shared_diversity(tmp_path, monkeypatch):
    """results/frontier/table.py: ELF and the AR's last and early-stopped models from two
    measure.json files; each pair of curves read at the middle of the distinct-2 range both span
    (log PPL interpolated), 'no shared distinct-2' where none; the AR's best step is its lowest
    dev loss; a second run scored with the GPT-2 judge too is kept beside the first (its pairs
    read on both judges), one of the same name replaces it; table.md renders again from
    table.json alone, byte for byte."""
    table = results_table("frontier")
    monkeypatch.setattr(table, "HERE", str(tmp_path))
    row = lambda system, setting, d2, ppl, gpt2=None: {
        "system": system,
        "setting": setting,
        "nfe": 8,
        "latency_s": 0.01,
        "quality": {
            "kn_ppl_ratio": ppl,
            **({"ppl_ratio": gpt2} if gpt2 else {}),
            **{k: {"mean": 0.5, "se": 0.01} for k in table.FIGURES},
            "distinct_2_matched": {"mean": d2, "se": 0.01},  # a curve's x
        },
        "examples": [f"{system} text"],
    }
    rep = lambda rows, judge="": {
        "machine": {"cpu": "Test CPU", "cpu_flags": ["avx2"]},
        "torch": "2.13.0",
        "git_commit": "abcdef0123",
        "context": {"split": "dev", "n": 64, "seeds": "0,1,2", "judge": judge},
        "reference": {"real": {k: {"mean": 0.5} for k in table.FIGURES}, "novelty_gram": 4},
        "rows": rows,
    }

    def run(name, last, best, judge=""):
        for sub, rows in (("last", last), ("best", best)):
            (tmp_path / name / sub).mkdir(parents=True, exist_ok=True)
            (tmp_path / name / sub / "measure.json").write_text(json.dumps(rep(rows, judge)))
        (tmp_path / name / "ar").mkdir(exist_ok=True)
        val = [{"step": s, "val_loss": v} for s, v in ((100, 3.0), (200, 2.5), (300, 2.8))]
        log = {"steps": 300, "minutes": 8.5, "val": val}
        (tmp_path / name / "ar" / "train_log.json").write_text(json.dumps(log))
        (tmp_path / name / "elf").mkdir(exist_ok=True)
        recs = [{"step": 10, "minutes": 1.0, "loss": 1}, {"step": 20, "minutes": 8.5, "loss": 1}]
        (tmp_path / name / "elf" / "metrics.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recs)
        )
        return str(tmp_path / name)

    last = [row("ELF", "ode 8", 0.80, 2.0), row("ELF", "ode 32", 0.90, 3.0)]
    last += [row("ELF", "sde 32", 0.99, 9.0)]  # beside the ODE's curve, not on it
    last += [row("AR", "cache T=0.7", 0.70, 1.0), row("AR", "cache T=1", 0.85, 4.0)]
    best = [row("AR", "cache T=0.7", 0.95, 1.5), row("AR", "cache T=1", 0.99, 2.0)]
    (t,) = table.collect(run("frontier", last, best))["runs"]
    assert t["name"] == "frontier" and t["judge"] == ""
    assert t["training"]["ar_best_step"] == 200 and t["training"]["elf_steps"] == 20
    assert [r["curve"] for r in t["rows"]] == ["ELF"] * 3 + ["AR last"] * 2 + [
        "AR early-stopped"
    ] * 2
    assert (tmp_path / "frontier.png").stat().st_size > 0
    m = table.matched(t["rows"], "ELF", "AR last")
    assert m["at"] == pytest.approx(0.825)
    assert m["ELF"] == pytest.approx(2 * 1.5**0.25) and m["AR last"] == pytest.approx(4 ** (5 / 6))
    md = table.render(json.loads(json.dumps({"runs": [t]})))
    assert "ELF / AR last at distinct-2 0.825: n-gram PPL / real 2.21 against 3.17" in md
    assert "ELF / AR early-stopped: no shared distinct-2 (one curve ends at 0.9" in md
    assert "Gen. PPL" not in md and table.render(json.loads(json.dumps({"runs": [t]}))) == md
    (tmp_path / "table.json").write_text(json.dumps({"runs": [t]}))
    # another day, the GPT-2 judge too: ELF's Gen. PPL 1.0 / 4.0, the last AR's 2.0 / 2.0
    gpt2 = [row("ELF", "ode 8", 0.80, 2.0, 1.0), row("ELF", "ode 32", 0.90, 3.0, 4.0)]
    gpt2 += [row("AR", "cache T=0.7", 0.70, 1.0, 2.0), row("AR", "cache T=1", 0.85, 4.0, 2.0)]
    best2 = [row("AR", "cache T=0.7", 0.95, 1.5, 3.0), row("AR", "cache T=1", 0.99, 2.0, 3.0)]
    both = table.collect(run("frontier_gpt2", gpt2, best2, judge="judges/x"))
    assert [r["name"] for r in both["runs"]] == ["frontier", "frontier_gpt2"]
    assert both["runs"][0] == t and (tmp_path / "frontier_gpt2.png").stat().st_size > 0
    md = table.render(both)
    assert "## Run `frontier_gpt2`" in md and "GPT-2 judge: `judges/x`" in md
    # at 0.825 ELF's log Gen. PPL is a quarter of the way from log 1 to log 4
    gen = "ELF / AR last at distinct-2 0.825: Gen. PPL / real (GPT-2 judge) 1.41 against 2"
    assert md.count("ELF / AR last at distinct-2 0.825: n-gram PPL / real 2.21") == 2 and gen in md
    (tmp_path / "table.json").write_text(json.dumps(both))  # measured again: replaced
    best2[0]["quality"]["ppl_ratio"] = 5.0
    again = table.collect(run("frontier_gpt2", gpt2, best2, judge="judges/x"))
    assert [r["name"] for r in again["runs"]] == ["frontier", "frontier_gpt2"]
    assert again["runs"][1]["rows"][-2]["ppl_ratio"] == 5.0 and again["runs"][0] == t
    t["rows"][0]["copies"] = {"mean": 0.0, "se": 0.0}  # all seeds agree: said, not "± 0"
    md = table.render({"runs": [t]})
    assert "| 0 (all 3 equal) |" in md and "± 0 " not in md
