"""The floors of conditional generation and the near-duplicate split (lib/floors.py), on made-up
pairs whose answers are known: retrieval of a training source returns its target, the constant
is the same for every source, copy returns the source; no dev or test source is near a training
source, and dev and test are disjoint, whole and fixed. Then the same through lib/heldout.py
(heldout_pairs' split, the Scorer's floors), results/cond_compare/table.py's floor rows and
results/cond_recipe/table.py's rows (each arm paired with base by training seed, the floors, the
diagnostics).

    OMP_NUM_THREADS=1 python -m pytest -q tests/test_floors.py
"""

import json
import os
import random
import types

import datasets
import pytest

from lib import floors as fl
from lib import heldout
from tests.conftest import results_table

# a made-up language and its word-for-word translation: the answer to every source is known
LEXICON = {
    "ich": "i",
    "du": "you",
    "sehe": "see",
    "habe": "have",
    "den": "the",
    "einen": "a",
    "hund": "dog",
    "katze": "cat",
    "baum": "tree",
    "fluss": "river",
    "heute": "today",
    "morgen": "tomorrow",
    "hier": "here",
    "dort": "there",
}
DE = list(LEXICON)


def sentences(n, seed, words=6):
    rng = random.Random(seed)
    src = [" ".join(rng.choice(DE) for _ in range(words)) for _ in range(n)]
    return src, [" ".join(LEXICON[w] for w in s.split()) for s in src]


def test_retrieval_of_a_training_source_returns_its_target():
    srcs, tgts = sentences(200, 0)
    for kind in ("translation", "summary"):
        out = fl.floors(srcs, tgts, srcs[:20], kind)["retrieval"]
        best, cos = fl.similar(srcs, srcs[:20], kind)
        assert all(c == pytest.approx(1.0) for c in cos)
        # an exact training source is its own nearest (or a duplicate source with its target)
        assert out == [tgts[i] for i in best] and all(srcs[i] == s for i, s in zip(best, srcs))


def test_the_constant_is_blind_copy_is_the_source_lead_its_first_words():
    srcs, tgts = sentences(200, 0)
    tgts = [t + " dog" for t in tgts]  # 'dog' the most frequent target word; 7 words a target
    held, _ = sentences(30, 1)
    out = fl.floors(srcs, tgts, held)
    assert set(out) == {"retrieval", "constant_7_words", "copy_source", "lead_7_words"}
    constant = out["constant_7_words"]
    assert len(set(constant)) == 1 and len(constant) == len(held)
    assert constant[0].split()[0] == "dog" and len(constant[0].split()) == 7
    assert constant[0].split() == fl.most_frequent_words(tgts, 7)
    assert out["copy_source"] == held
    assert out["lead_7_words"] == [" ".join(s.split()[:7]) for s in held]


def test_task_kind_by_length():
    short, _ = sentences(10, 0, words=5)
    long, _ = sentences(10, 0, words=40)
    assert fl.task_kind(short, short) == "translation" and fl.task_kind(long, short) == "summary"
    with pytest.raises(ValueError, match="unknown task kind 'x'"):
        fl.vectorizer("x")


def held_out_set():
    """Training pairs, and held-out sources of which 10 are training sources with one word
    changed (near) and 60 are new sentences over other words (far)."""
    train, _ = sentences(300, 0, words=8)
    rng = random.Random(2)
    near = [" ".join(s.split()[:-1] + ["dort"]) for s in rng.sample(train, 10)]
    far = [f"völlig neu satz nummer {i} ohne bekannte wörter {i * 7}" for i in range(60)]
    held = near + far
    rng.shuffle(held)
    return train, held


def test_the_split_keeps_no_near_source_in_dev_or_test_and_is_disjoint_and_fixed():
    train, held = held_out_set()
    _, cos = fl.similar(train, held, "translation")
    parts = {s: fl.split_pairs(train, held, s, "translation") for s in fl.PAIR_SPLITS}
    assert all(cos[i] < fl.NEAR for i in parts["dev"] + parts["test"])
    assert all(cos[i] >= fl.NEAR for i in parts["near"]) and len(parts["near"]) >= 10
    assert not set(parts["dev"]) & set(parts["test"]) and parts["dev"] and parts["test"]
    assert sorted(parts["dev"] + parts["test"] + parts["near"]) == parts["all"]
    assert parts["all"] == list(range(len(held)))
    # fixed: again the same, and the same pairs in another order
    assert fl.split_pairs(train, held, "dev", "translation") == parts["dev"]
    rev = fl.split_pairs(train, held[::-1], "dev", "translation")
    assert sorted(len(held) - 1 - i for i in rev) == parts["dev"]
    with pytest.raises(ValueError, match="unknown split 'val'"):
        fl.split_pairs(train, held, "val", "translation")


def test_heldout_pairs_takes_a_split_and_the_scorer_scores_the_floors(monkeypatch):
    train, held = held_out_set()
    refs = [" ".join(LEXICON.get(w, w) for w in s.split()) for s in held]
    tables = (
        datasets.Dataset.from_dict({"source": train, "target": [s.upper() for s in train]}),
        datasets.Dataset.from_dict({"source": held, "target": refs}),
    )
    monkeypatch.setattr(heldout, "pair_tables", lambda dcfg: tables)
    dcfg = types.SimpleNamespace(dataset="made-up")
    _, srcs, _ = heldout.heldout_pairs(dcfg, 1000, None)
    assert srcs == held  # 'all', as before the split
    got = {s: heldout.heldout_pairs(dcfg, 1000, None, s)[1] for s in ("dev", "test", "near")}
    assert sorted(sum(got.values(), [])) == sorted(held)
    near = set(got["near"])
    assert near >= {s for s in held if s.endswith("dort")} and not near & set(got["test"])
    assert heldout.heldout_pairs(dcfg, 3, None, "test")[1] == got["test"][:3]
    tr = heldout.training_pairs(dcfg, None)
    assert tr == (train, [s.upper() for s in train])
    scorer = heldout.Scorer(held, held, lambda texts: [t.split() for t in texts], False, tr)
    assert scorer.baselines["copy_source"]["bleu"] == pytest.approx(100.0)
    assert {"retrieval", "constant_8_words", "copy_source", "lead_8_words"} == set(scorer.baselines)
    old = heldout.Scorer(held, held, lambda texts: [t.split() for t in texts], False)
    # without training pairs: copy and lead-k, k the references' median length (the far 9 words)
    assert set(old.baselines) == {"copy_source", "lead_9_words"}


def test_the_table_shows_the_floors_of_each_split(tmp_path, monkeypatch):
    """results/cond_compare/table.py: the floors, measured per split, are rows of table.md."""
    table = results_table("cond_compare")
    monkeypatch.setattr(table, "HERE", str(tmp_path))
    f = {m: 1.0 for m in ("bleu", "rouge1", "rouge2", "rougeL", "entropy")}
    t = {
        "n": 2,
        "seeds": [0],
        "systems": {},
        "trivial": {"copy_source": f},
        "reference_entropy": 1.0,
        "rows": [],
        "floors": {
            "near": 0.7,
            "splits": {
                "all": {"n": 117, "floors": {"retrieval": f, "constant_7_words": f}},
                "test": {"n": 40, "floors": {"retrieval": {**f, "bleu": 12.5}}},
            },
        },
    }
    table.render(t, "de_en")
    md = (tmp_path / "de_en" / "table.md").read_text()
    assert "| (floor, all: 117 pairs) | retrieval | 0 | 1.00 |" in md
    assert "| (floor, test: 40 pairs) | retrieval | 0 | 12.50 |" in md
    assert "| (floor, all: 117 pairs) | constant_7_words |" in md


def test_a_conditional_checkpoints_diagnostics_and_split(tmp_path):
    """evaluate.py's held-out mode on a 3-step conditional checkpoint: the floors beside it, the
    split recorded, --diagnose's scores on training pairs and with sources shuffled or zeroed,
    and the decomposition's round trips from t0 = 0.9 down to 0.1 (an untrained model: the
    figures exist and are scores, not that they are high)."""
    import evaluate
    import train

    srcs, tgts = sentences(120, 0, words=4)
    data = tmp_path / "pairs.jsonl"
    rows = [json.dumps({"source": s, "target": t}) + "\n" for s, t in zip(srcs, tgts)]
    data.write_text("".join(rows))
    out = tmp_path / "run"
    train.main(
        [
            "configs/de_en_tiny.py",
            f"--dataset={data}",
            "--val_size=12",
            "--max_length=16",
            "--max_input_length=8",
            f"--out_dir={out}",
            f"--cache_dir={tmp_path / 'cache'}",
            "--model=tiny",
            "--max_steps=3",
            "--time_limit_min=0",
            "--eval_interval=3",
            "--ckpt_interval=3",
            "--warmup_steps=1",
            "--n_samples=0",
            "--batch_size=8",
        ]
    )
    report = evaluate.main(
        [
            f"--ckpt={out}",
            "--n=6",
            f"--out_dir={tmp_path / 'eval'}",
            "--steps=2",
            "--seeds=0",
            "--decompose=on",
            "--decompose_n=4",
            "--diagnose",
        ]
    )
    # round trips with the source held, from near the data down to near noise
    assert [r["t0"] for r in report["decomposition"]["round_trip"]] == [0.9, 0.7, 0.5, 0.3, 0.1]
    for r in report["decomposition"]["round_trip"]:
        assert 0 <= r["acc_text"] <= 1
    assert report["split"] == "all" and report["n"] == 6
    assert {"retrieval", "copy_source"} <= set(report["baselines"])
    d = report["diagnostics"]
    assert set(d) == {"setting", "heldout", "train", "train_full", "shuffled", "zeroed"}
    for k in ("heldout", "train", "train_full", "shuffled", "zeroed"):
        assert 0 <= d[k]["bleu"] <= 100 and 0 <= d[k]["rouge1"] <= 100
    assert d["heldout"] == report["results"][0]["per_seed"][0]
    assert "| zeroed |" in (tmp_path / "eval" / "report.md").read_text()
    with pytest.raises(ValueError, match="unknown split 'val' \\(choose from dev, test, near, all"):
        evaluate.main([f"--ckpt={out}", "--split=val", f"--out_dir={tmp_path / 'eval2'}"])


def test_outputs_of_every_right_token_score_100_once_references_are_read_back():
    """A model over MiniLM's uncased WordPiece writes "it ' s" and "student - led": its every
    token right scores below 100 against raw references, and 100 once the Scorer reads
    references and outputs back through the same tokenizer; a copy of the raw reference (as a
    floor writes) scores 100 both ways."""
    from encoder import Tokenizer

    tok = Tokenizer("minilm")
    refs = ["It's a deal! I'll be in touch.", "Student-led demonstrations in China (1989)"]
    srcs = ["Abgemacht!", "Studentenproteste"]
    outputs = [tok.detokenize(ids) for ids in tok.tokenize(refs)]  # every token right
    raw = heldout.Scorer(srcs, refs, tok.tokenize, log=False)
    read = heldout.Scorer(srcs, refs, tok.tokenize, log=False, read=tok.read_back)
    assert raw.scores(outputs)["bleu"] < 80 and read.scores(outputs)["bleu"] == pytest.approx(100)
    assert read.scores(outputs)["rouge2"]["mean"] == pytest.approx(100)
    assert raw.scores(refs)["bleu"] == read.scores(refs)["bleu"] == pytest.approx(100)


ROUGE = ("rouge1", "rouge2", "rougeL")
PROVENANCE = {  # a row's provenance, as lib.report.row_provenance writes it
    "commit": "abcdef0123",
    "cpu": "a CPU",
    "cpu_flags": ["avx2"],
    "torch": "2.13.0",
    "date": "2026-12-06T12:00:00",
}


def fake_run(root, arm, seed, bleu, split="dev"):
    """A run folder as results/cond_recipe/run.sh leaves it: metrics.jsonl, the log and one
    evaluate.py report whose scores are all `bleu` (only the fields table.py reads)."""
    run = root / f"{arm}-s{seed}"
    (run / "eval").mkdir(parents=True)
    recs = [{"minutes": 16.0, "step": 800, "val_mse": 0.5, "val_ce": 1.5}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (root / f"{arm}-s{seed}.log").write_text("model tiny: 4.89M parameters\n")
    f = {"bleu": 17.5, "entropy": 1.0, **{m: {"mean": 1.0, "se": 0.1} for m in ROUGE}}
    scores = {m: {"mean": bleu, "se": 0.0} for m in ("bleu", "rouge1", "rouge2", "rougeL")}
    result = {
        "setting": {"steps": 32, "grid": "logit_normal"},
        "nfe": 32,
        "seconds": {"mean": 3.9, "se": 0.0},
        "entropy": {"mean": 1.0, "se": 0.0},
        **scores,
    }
    rep = {
        "split": split,
        "n": 39,
        "seeds": [0, 1, 2],
        "baselines": {"retrieval": f},  # ROUGE with its s.e. over pairs, as reports hold it
        "reference_entropy": 1.2,
        "results": [
            {**result, "setting": {**result["setting"], "guidance": g}} for g in (1.0, 2.0)
        ],
        "provenance": PROVENANCE,
    }
    (run / "eval" / "report.json").write_text(json.dumps(rep))


def test_the_recipe_table_pairs_each_arm_with_base_by_training_seed(tmp_path, monkeypatch):
    """results/cond_recipe/table.py: an arm's difference from base is paired by training seed
    (mean of the differences, its 95% t-interval), one seed prints n=1 and no interval, the
    split's floors are rows, and a report of another split than its folder says is refused."""
    table = results_table("cond_recipe")
    monkeypatch.setattr(table, "HERE", str(tmp_path))
    runs = tmp_path / "runs"
    for seed, b, r in ((0, 1.0, 2.0), (1, 2.0, 4.0), (2, 3.0, 3.0)):
        fake_run(runs, "base", seed, b)
        fake_run(runs, "recipe", seed, r)
    fake_run(runs, "block3", 0, 5.0)
    (runs / "nosc-s0").mkdir()  # still training: no report, not a row
    diag = {"bleu": 0.5, "rouge1": 9.0}
    (runs / "recipe-s0" / "diag").mkdir()
    (runs / "recipe-s0" / "diag" / "report.json").write_text(
        json.dumps(
            {
                "n": 39,
                "diagnostics": {
                    "setting": {"steps": 32, "guidance": 2.0},
                    **{k: diag for k in ("heldout", "shuffled", "zeroed")},
                    "train": {"bleu": 80.0, "rouge1": 90.0},
                },
                "decomposition": {
                    "n": 64,
                    "decoder": {"acc_text": 0.96},
                    "round_trip": [{"t0": 0.9, "acc_text": 0.8}, {"t0": 0.1, "acc_text": 0.3}],
                    "adjacent_cosine": {"first_step_text": 0.82, "real_text": 0.41},
                },
            }
        )
    )
    t = table.collect(str(runs))
    assert [(r["arm"], r["seed"]) for r in t["runs"]] == [
        ("base", 0), ("base", 1), ("base", 2), ("block3", 0),
        ("recipe", 0), ("recipe", 1), ("recipe", 2),
    ]  # fmt: skip
    assert (tmp_path / "recipe.png").is_file()
    md = table.render(t)
    rows = {line.split(" | ")[0][2:]: line for line in md.splitlines() if line.startswith("| ")}
    # differences 1, 2, 0: mean 1, s.e. 1/sqrt(3), t(2) = 4.303 -> half-width 2.48
    assert "| 3.00 +- 0.58 (n=3) | +1.00 [-1.48, +3.48] (n=3) |" in rows["recipe"]
    assert "| 2.00 +- 0.58 (n=3) |  |" in rows["base"]
    assert "| 5.00 (n=1) | +4.00 (n=1) |" in rows["block3"]
    assert "| 17.50 |" in rows["floor: retrieval"]
    assert "recipe against block3, BLEU paired by training seed: CFG 1 -3.00 (n=1)" in md
    assert "dev split**: 39 held-out de->en pairs" in md and "test split" not in md
    assert "pad against" not in md  # no pad arm, no reading of it
    # the padding arm read against its control seed by seed (differences 0.5 and 1.5)
    for seed, ctl, pad in ((0, 2.0, 2.5), (1, 3.0, 4.5)):
        fake_run(runs, "recipe_ctl", seed, ctl)
        fake_run(runs, "pad", seed, pad)
    monkeypatch.setattr(table, "TASK", "wiki_summary")
    md = table.render(table.collect(str(runs)))
    assert (
        "pad against recipe_ctl, BLEU paired by training seed: CFG 1 +1.00 [-5.35, +7.35] (n=2)"
        in md
    )
    assert (
        "recipe_ctl against recipe, BLEU paired by training seed: CFG 1 -0.50 [-6.85, +5.85] (n=2)"
        in md
    )
    assert "39 held-out summaries pairs" in md
    assert (
        "| recipe-s0 | 0.50 / 9.0 | 80.00 / 90.0 | 0.50 / 9.0 | 0.50 / 9.0 | 0.960 | 0.800 |" in md
    )
    assert "| 0.300 | 0.82 (real 0.41) |" in rows["recipe-s0"] and "base-s0" not in rows
    fake_run(tmp_path / "wrong", "base", 0, 1.0, split="test")
    with pytest.raises(ValueError, match="scores split 'test', not 'dev'"):
        table.collect(str(tmp_path / "wrong"))


def fake_minutes_runs(root, wrong_split=False, more=0):
    """What results/cond_minutes/run.sh leaves, only the fields its table.py reads: each
    system's run folder (snapshots at-26min, the end, the GPT-2's best and its copy) and a
    report per system, point and split whose BLEU is the step count / 100 (`more` steps each
    for another training seed)."""
    steps = {"elf": (1000, 2200), "ar": (900, 2000), "mdlm": (1200, 2600)}
    steps = {k: (a + more, b + more) for k, (a, b) in steps.items()}

    def step_folder(folder, step, **meta):
        (folder / f"step-{step:08d}").mkdir(parents=True)
        (folder / f"step-{step:08d}" / "train.json").write_text(json.dumps({"step": step, **meta}))
        (folder / "latest").write_text(f"step-{step:08d}\n")

    for system, (at26, end) in steps.items():
        step_folder(root / system / "at-26min", at26)
        step_folder(root / system, end)
    (root / "elf" / "metrics.jsonl").write_text(json.dumps({"minutes": 60.2, "step": 2200}) + "\n")
    (root / "mdlm" / "metrics.jsonl").write_text(json.dumps({"minutes": 60.1, "step": 2600}))
    (root / "ar" / "train_log.json").write_text(json.dumps({"minutes": 60.3}))
    step_folder(root / "ar" / "at-26min-best", 500, val_loss=1.5)
    step_folder(root / "ar" / "best", 500, val_loss=1.5)
    f = {"bleu": 13.4, "entropy": 1.0, **{m: {"mean": 1.0, "se": 0.1} for m in ROUGE}}
    names = {
        "elf": None,
        "ar": "AR greedy",
        "ar_best": "AR greedy",
        "mdlm": "MDLM 128 steps (prob)",
    }
    for system, name in names.items():
        for point in ("26", "end"):
            for split in ("dev", "test"):
                s = steps["ar" if system == "ar_best" else system][point == "end"]
                if system == "ar_best":
                    s = 500
                score = {"mean": s / 100, "se": 0.1}
                setting = {"guidance": 2.0} if name is None else {"name": name}
                rep = {
                    "split": "near" if wrong_split else split,
                    "n": 39,
                    "baselines": {"retrieval": f},
                    "reference_entropy": 1.2,
                    "results": [
                        {
                            "setting": setting,
                            "nfe": 65,
                            "seconds": {"mean": 3.9},
                            "per_seed": [{}, {}, {}],
                            **{m: score for m in ("bleu", "rouge1", "rouge2", "rougeL")},
                            "entropy": score,
                        }
                    ],
                    "provenance": PROVENANCE,
                }
                folder = root / "eval" / f"{system}-{point}-{split}"
                folder = folder if system == "elf" else folder / "heldout"
                folder.mkdir(parents=True)
                (folder / "report.json").write_text(json.dumps(rep))


def test_the_minutes_table_reads_each_point_of_each_system(tmp_path, monkeypatch):
    """results/cond_minutes/table.py: every (system, point, split) report is a row with the
    steps trained by then (the GPT-2's early-stopped row: the steps trained and the step of its
    best weights), the end point's minutes are the run's own, the floors are rows, the plot is
    drawn, and a report of another split than its folder says is refused."""
    table = results_table("cond_minutes")
    monkeypatch.setattr(table, "HERE", str(tmp_path))
    fake_minutes_runs(tmp_path / "runs")
    t = table.collect(str(tmp_path / "runs"))
    assert (tmp_path / "minutes.png").is_file() and len(t["rows"]) == 16
    at = {(r["system"], r["point"], r["split"]): r for r in t["rows"]}
    # the end is named by its budget (the least of the runs' end minutes, 60.1, rounded)
    assert at[("elf", "26", "dev")]["steps"] == 1000 and at[("elf", "60", "dev")]["steps"] == 2200
    assert (
        at[("elf", "60", "test")]["minutes"] == 60.2 and at[("ar", "60", "dev")]["minutes"] == 60.3
    )
    best = at[("ar_best", "26", "dev")]
    assert (best["steps"], best["best_step"], best["val_loss"]) == (900, 500, 1.5)
    assert at[("elf", "26", "dev")]["setting"] == "CFG 2"
    md = table.render(t)
    elf = "| ELF, the config as it ships | CFG 2 | 10.00 +- 0.10 (1000 steps) | 22.00 +- 0.10 ("
    assert elf + "2200 steps) |" in md
    assert "| 2000 (best at step 500) |" in md and "| floor: retrieval | | 13.40 | 13.40 |" in md
    assert md.count("split**: 39 held-out") == 2
    fake_minutes_runs(tmp_path / "wrong", wrong_split=True)
    with pytest.raises(ValueError, match="scores split 'near', not 'dev'"):
        table.collect(str(tmp_path / "wrong"))


def test_the_minutes_table_reads_training_seeds_and_pairs_them(tmp_path, monkeypatch):
    """Two training seeds' folders (run.sh SEED=1 writes <runs>_s1): each figure the mean over
    the seeds with their s.e., ELF read against MDLM and the early-stopped GPT-2 seed by seed
    with the paired interval; one seed's table is as before; a seed given twice is refused."""
    table = results_table("cond_minutes")
    monkeypatch.setattr(table, "HERE", str(tmp_path))
    fake_minutes_runs(tmp_path / "de_en")
    fake_minutes_runs(tmp_path / "de_en_s1", more=300)  # BLEU 3 higher, ELF's gap the same
    one = table.render(table.collect(str(tmp_path / "de_en")))
    t = table.collect(str(tmp_path / "de_en"), str(tmp_path / "de_en_s1"))
    assert t["seeds"] == [0, 1] and len(t["rows"]) == 32
    md = table.render(t)
    assert md != one and "minus" not in one
    # ELF CFG 2 at 26 minutes: 10.00 and 13.00 -> 11.50 +- 1.50 over the two seeds
    assert "| ELF, the config as it ships | CFG 2 | 11.50 +- 1.50 (1150 steps) |" in md
    # ELF - MDLM: -2 at 26 minutes and -4 at the end in both seeds: no spread, no width
    assert "MDLM 128 steps (prob) | paired by seed | -2.00 [-2.00, -2.00] (n=2) | -4.00" in md
    assert "(best at step 500 / 500)" in md and "over training seeds (0, 1;" in md
    with pytest.raises(ValueError, match="two runs folders of one training seed"):
        table.collect(str(tmp_path / "de_en"), str(tmp_path / "wrong_s0"))


def test_a_seed_trained_later_for_longer_joins_the_kept_minutes_table(tmp_path, monkeypatch):
    """run.sh SEED=2 MINUTES=90 SNAPS=26,60 on another day: collecting its folder alone joins
    the kept table's seeds 0 and 1 (their 60-minute end lines up with its 60-minute snapshot,
    its 90-minute end stands alone, n=1; n said where fewer seeds than the table's), each seed's
    machine is said, every score shown at each budget's end; a seed given again takes its new
    figures; a kept table of other split sizes is refused, not replaced."""
    table = results_table("cond_minutes")
    monkeypatch.setattr(table, "HERE", str(tmp_path))
    fake_minutes_runs(tmp_path / "de_en")
    fake_minutes_runs(tmp_path / "de_en_s1", more=300)
    kept = table.collect(str(tmp_path / "de_en"), str(tmp_path / "de_en_s1"))
    for r in kept["rows"]:  # as the kept de->en table holds them: the end named 'end', one
        r["point"] = "end" if r.pop("end", False) else r["point"]  # provenance for both seeds
    del kept["seed_provenance"]
    (tmp_path / "table.json").write_text(json.dumps(kept))
    fake_minutes_runs(tmp_path / "de_en_s2", more=600)
    s2 = tmp_path / "de_en_s2"
    for system in ("elf", "ar", "mdlm"):  # its 60-minute end becomes a snapshot; a 90 end
        (s2 / system / "at-26min").rename(s2 / system / "at-60min")
    (s2 / "ar" / "at-26min-best").rename(s2 / "ar" / "at-60min-best")
    for name in os.listdir(s2 / "eval"):
        if "-26-" in name:
            os.rename(s2 / "eval" / name, s2 / "eval" / name.replace("-26-", "-60-"))
    (s2 / "elf" / "metrics.jsonl").write_text(json.dumps({"minutes": 90.4, "step": 2800}))
    (s2 / "mdlm" / "metrics.jsonl").write_text(json.dumps({"minutes": 90.2, "step": 3200}))
    (s2 / "ar" / "train_log.json").write_text(json.dumps({"minutes": 90.1}))
    for rep in (s2 / "eval").glob("**/report.json"):
        rep.write_text(rep.read_text().replace(PROVENANCE["cpu"], "AMD EPYC"))
    t = table.collect(str(s2))
    assert t["seeds"] == [0, 1, 2] and len(t["rows"]) == 48
    assert table.points(t) == ["26", "60", "90"]
    md = table.render(t)
    # ELF CFG 2 at 60 minutes: the ends of seeds 0 and 1 (22, 25) and seed 2's snapshot (16)
    elf = "| ELF, the config as it ships | CFG 2 | 11.50 +- 1.50 (n=2) (1150 steps) | 21.00 +- 2.65"
    assert elf + " (2100 steps) |" in md
    assert "| 28.00 (n=1) (2800 steps) |" in md  # seed 2's end, alone
    assert "Training seeds 0, 1: one record kept for them all, the last collected's: Commit" in md
    assert "Training seed 2: Commit" in md and "AMD EPYC" in md
    # every score at each budget's end: seeds 0 and 1's (seed 2's snapshot beside), seed 2's
    assert md.count("At 60 minutes, the end of training seeds 0, 1's budget") == 2
    assert md.count("At 90 minutes, the end of training seed 2's budget") == 2
    assert (
        "| 60.1 | 2100 | 65.0 | 21.00 +- 2.65 |" in md
        and "| 90.4 | 2800 | 65.0 | 28.00 (n=1)" in md
    )
    (tmp_path / "table.json").write_text(json.dumps(t))  # kept, then collected again:
    again = table.collect(str(s2))  # seed 2 takes its figures anew, nothing twice
    assert sorted(map(json.dumps, again["rows"])) == sorted(map(json.dumps, t["rows"]))
    kept["splits"]["dev"]["n"] = 40  # other pairs: refused, the kept table left as it is
    (tmp_path / "table.json").write_text(json.dumps(kept))
    with pytest.raises(ValueError, match=r"of other pairs \(dev: 40 pairs kept, 39 now\)"):
        table.collect(str(s2))
    # a smoke test's snapshot at 0 minutes and its end at 0.1: the end keeps its name
    rows = [{"point": "0", "minutes": 0.0}, {"point": "end", "minutes": 0.1}]
    table.name_end(rows)
    assert [r["point"] for r in rows] == ["0", "end"]
