"""Evaluate ELF checkpoints: samples scored beside real text of the same kind (the yardstick),
sweeps of sampler settings, held-out BLEU/ROUGE of conditional checkpoints, and distilled
students against their teacher.

    python evaluate.py --ckpt out/tiny --judge judges/desc_wiki  # yardstick: 64 samples x 3 seeds
    python evaluate.py --ckpt out/tiny --split test  # no GPT-2 judge: the n-gram judge, MAUVE, ...
    python evaluate.py --ckpt out/tiny --judge judges/desc_wiki --sampler ode,sde --steps 8,16,32
    python evaluate.py --samples out/ar_tiny/samples.jsonl --ckpt out/tiny --judge judges/desc_wiki
    python evaluate.py --ckpt out/de_en_tiny --n 117 \
        --guidance 1,1.5,2,3   # conditional: BLEU/ROUGE
    python evaluate.py --ckpt out/de_en_tiny --split test --diagnose   # does it read its source?
    python evaluate.py --distill out/distill_tiny --ckpt out/tiny --judge judges/desc_wiki

The yardstick (METHOD.md, "Evaluation"). A number such as "Gen. PPL 80" means little alone: it
depends on the judge, the data and the length. So every sample set is reported beside the same
metrics of real held-out text of the checkpoint's own data, and of that text with its words
shuffled (lib/reference.py, with the targets of the default run); the headline is the ratio of
the samples' Gen. PPL to the real text's. Without --judge the yardstick still runs: diversity
at a matched number of texts, a Kneser-Ney n-gram judge fitted in seconds on the training split
(its PPL over real text's), MAUVE against real text, novelty; these are reported with a judge
too. The held-out text is split by a hash of each text: `--split dev` (the default) is where
choices are made (tools/ablate.py scores there), `--split test` is read once for the headline
figures (the README's). Each setting is sampled with several seeds (n texts each) and reported
as the mean and standard error over seeds, each row with its provenance (commit, CPU, torch,
judges, split, date). The metrics themselves are defined in lib/metrics.py, lib/ngram.py and
lib/mauve_score.py, the reports' tables and plots written by lib/report.py.
"""

import contextlib
import hashlib
import itertools
import json
import os
import time
from dataclasses import dataclass

import torch

from conditional import layout
from encoder import FrozenEncoder, Latents
from flow import PRESETS, Denoiser, FlowConfig, sample_latents, time_grid
from lib import checkpoint, shards
from lib.checkpoint import provenance
from lib.config import MAX_SAMPLES, comma_list, parse
from lib.data import load_token_rows
from lib.decompose import (
    ROUND_TRIP_T0,
    ROUND_TRIP_T0_COND,
    decompose,
    markdown,
    plot_trajectory,
)
from lib.dist import distributed, on_rank0
from lib.floors import PAIR_SPLITS
from lib.guard import Writer, cli, what_is
from lib.heldout import Scorer, heldout_pairs, training_pairs, write_report
from lib.mauve_score import FEATURES, features
from lib.metrics import load_judge
from lib.ngram import fit_cached
from lib.outputs import atomic_write_text
from lib.pairs import load_pair_rows
from lib.reference import (
    SPLITS,
    Instrument,
    data_config,
    novelty_gram,
    reference,
    score_sets,
    with_ratios,
)
from lib.report import (
    default_out_dir,
    evaluation_of,
    keep_other_reports,
    label,
    plot,
    plot_guidance,
    row_provenance,
    write_json,
    write_markdown,
)
from sample import generate, generate_conditional, load_sampler


@dataclass
class EvalConfig:
    """Sample an ELF checkpoint and score it beside real text (or score a samples file)."""

    ckpt: str = ""  # train.py out_dir: sampled, and its data is the reference
    samples: str = ""  # JSONL of {"text", "seed"}: scored instead of sampling ckpt
    # causal LM: baselines/ar.py or hub name (paper: gpt2-large); '' = no Gen. PPL, the
    # n-gram judge and the rest still run
    judge: str = ""
    # held-out text: dev (choices), test (headline figures), all; '' = dev (conditional: '' =
    # all, and 'near': pairs near a training pair, lib/floors)
    split: str = ""
    out_dir: str = ""  # report.json/.md, plots; empty: <run>/eval (default_out_dir)
    n: int = 64  # samples per seed (conditional: held-out pairs; at most 10 million)
    seeds: str = "0,1,2"  # one sample set per seed
    preset: str = ""  # a preset; '' = the ckpt's sample_preset (uncond32 / cond64)
    sampler: str = ""  # it and the keys below override the preset; a list sweeps
    steps: str = ""
    sc_cfg: str = ""
    gamma: str = ""
    grid: str = ""
    guidance: str = ""  # CFG scale of conditional sampling
    diagnose: bool = False  # conditional: BLEU on training pairs, and sources shuffled or zeroed
    decompose: str = "on"  # error decomposition: on (with scores), only (no judge), off
    decompose_n: int = 64  # held-out rows it measures
    distill: str = ""  # a distill.py out_dir: rounds and --ckpt scored at few steps
    distill_steps: str = "1,2,4,8"  # its step counts, each with the fewstep<n> preset
    control: str = ""  # distill.py --objective flow's out_dir: the rounds without distillation
    traj_n: int = 64  # noise draws for the trajectory error
    traj_ref_steps: int = 64  # steps of the reference: teacher's Euler ODE, uniform grid
    traj_sc_cfg: float = 2.5  # SC-CFG scale of those ODE runs (the fewstep presets' w)
    batch_size: int = 64  # samples per forward; the chunk a restarted sample run keeps
    progress: bool = False  # a progress bar per rank while sampling, in samples/s
    overwrite: bool = False  # replace out_dir's report of another checkpoint
    device: str = "auto"  # auto, cpu, cuda (torchrun: rank r takes cuda:LOCAL_RANK)


# ----------------------------------------------------------------------------------------
# the reference: real held-out text and the training documents of a checkpoint's data


def decomposition(cfg: EvalConfig, model, encoder, meta, setting, device):
    """The error decomposition (lib/decompose.py) of a checkpoint on its own held-out and training
    rows, under one sampler setting; trajectory.png goes to out_dir."""
    dcfg = data_config(meta)
    rows = (load_pair_rows if dcfg.max_input_length else load_token_rows)(dcfg, encoder)
    train, val = (
        Latents(encoder, r, dcfg.cache_dir, bool(getattr(dcfg, "latent_cache", False)))
        for r in rows
    )
    preset = {
        k: v
        for k, v in setting.items()
        if k in ("sampler", "steps", "sc_cfg", "gamma", "grid", "guidance")
    }
    t0s = ROUND_TRIP_T0_COND if dcfg.max_input_length else ROUND_TRIP_T0
    flow = FlowConfig(**meta["flow"])
    d = decompose(model, encoder, val, train, flow, preset, n=cfg.decompose_n, t0s=t0s)
    os.makedirs(cfg.out_dir, exist_ok=True)
    plot_trajectory(d["trajectory"], os.path.join(cfg.out_dir, "trajectory.png"))
    dec, rt = d["decoder"], {r["t0"]: r for r in d["round_trip"]}
    print(
        f"decomposition: decoder {dec['acc_text']:.3f} of text tokens "
        f"(nearest latent {dec['nn_acc_text']:.3f}); "
        "round trip "
        + ", ".join(
            f"t0 {t:g}: {r['acc_text']:.3f} / rep {r['repetition']:.2f}" for t, r in rt.items()
        )
        + f"; neighbours' cosine {d['adjacent_cosine']['first_step_text']:.3f} at the first step "
        f"(real {d['adjacent_cosine']['real_text']:.3f})",
        flush=True,
    )
    return d


# ----------------------------------------------------------------------------------------
# sampler settings: a preset, overridden key by key; comma lists make a sweep


def settings(cfg: EvalConfig, default_preset: str):
    """-> [dict of sample.generate keyword arguments], the product of the comma lists."""
    preset = cfg.preset or default_preset
    if preset not in PRESETS:
        raise ValueError(f"unknown preset '{preset}' (choose from {', '.join(PRESETS)})")
    kinds = {
        "sampler": str,
        "steps": int,
        "sc_cfg": float,
        "gamma": float,
        "grid": str,
        "guidance": float,
    }
    # key -> the values to sweep (one value: no sweep)
    axes = {
        key: comma_list(key, getattr(cfg, key), kind)
        for key, kind in kinds.items()
        if getattr(cfg, key)
    }
    bad = [v for v in axes.get("steps", []) if v < 1]
    if bad:
        raise ValueError(f"steps must be >= 1, got {bad[0]} in '{cfg.steps}'")
    base = PRESETS[preset]
    # every combination of the swept values, each on top of the preset
    return [
        {**base, **dict(zip(axes, combo)), "preset": preset}
        for combo in itertools.product(*axes.values())
    ]


# ----------------------------------------------------------------------------------------
# the harness


def read_samples(path):
    """A samples JSONL -> {seed: [text]}; one line that names the file and line on bad input."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no samples file at {path}")
    sets = {}
    with open(path, "rb") as f:
        for i, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:  # never scored as replacement characters
                raise ValueError(
                    f"{path}:{i}: not UTF-8 text (byte {raw[e.start]:#x} at {e.start})"
                ) from None
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not JSON ({e.msg})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
                raise ValueError(f"{path}:{i}: a sample needs a 'text' string")
            if not isinstance(rec.get("seed", 0), int) or isinstance(rec.get("seed"), bool):
                raise ValueError(
                    f"{path}:{i}: a sample's 'seed' is an integer, got {rec['seed']!r}"
                )
            sets.setdefault(rec.get("seed", 0), []).append(rec["text"])
    if not sets:
        raise ValueError(f"samples file {path} is empty")
    return sets


def sample_set(cfg: EvalConfig, model, encoder, meta, kw, seed: int, prov, device, rank=0, world=1):
    """cfg.n samples of one setting and seed through shards.run: split over the ranks, kept in
    out_dir/samples/ and resumed by a rerun. One folder per checkpoint, setting and seed, so
    an evaluation of other weights into the same out_dir never meets a folder it must refuse."""
    length = meta["train"]["max_length"]
    spec = {
        **kw,
        "seed": seed,
        "length": length,
        "batch_size": cfg.batch_size,
        "device": torch.device(device).type,
    }
    key = hashlib.sha256(
        json.dumps([prov.get("ckpt_sha256"), cfg.n, spec], sort_keys=True).encode()
    ).hexdigest()
    folder = os.path.join(
        cfg.out_dir, "samples", f"{kw['sampler']}{kw['steps']}-seed{seed}-{key[:10]}"
    )
    draw = lambda idx: generate(
        model,
        encoder,
        indices=idx,
        length=length,
        seed=seed,
        flow=FlowConfig(**meta["flow"]),
        batch_size=cfg.batch_size,
        **kw,
    )
    return shards.run(
        folder,
        spec,
        prov,
        cfg.n,
        cfg.batch_size,
        draw,
        rank,
        world,
        cfg.progress,
        desc=f"{kw['sampler']} {kw['steps']} steps, seed {seed}",
    )


def make_instrument(meta, encoder, train_docs, held, real, size: int, device):
    """The judge-free figures' scorer (lib.reference.Instrument) and its n-gram judge: the
    Kneser-Ney LM of the training split (cached), MAUVE on MiniLM features."""
    lm = fit_cached(train_docs, encoder.vocab_size, encoder.eos_id, data_config(meta).cache_dir)
    fenc = mauve_encoder(encoder, device)
    return Instrument(size, lm, lambda texts: features(fenc, texts), held, real), lm


def mauve_encoder(encoder, device):
    """MAUVE's feature encoder (lib/mauve_score.FEATURES): the sampler's own when it is the
    pretrained MiniLM read at its last layer, else that one loaded."""
    if (encoder.name, encoder.weights, encoder.layer) == ("minilm", "pretrained", -1):
        return encoder
    return FrozenEncoder("minilm").to(device)


def show(name, r, real=None):
    """One line of a set's judge-free figures, real text's beside them."""
    beside = lambda k, f: f"{r[k]['mean']:{f}}" + (f" (real {real[k]['mean']:{f}})" if real else "")
    ratio = f" ({r['kn_ppl']['mean'] / real['kn_ppl']['mean']:.2f}x real)" if real else ""
    return (
        f"{name}: n-gram PPL {r['kn_ppl']['mean']:.1f}{ratio}  MAUVE {beside('mauve', '.3f')}  "
        f"distinct-2 {beside('distinct_2_matched', '.3f')}  "
        f"self-BLEU {beside('self_bleu', '.1f')}  length {beside('length', '.1f')}  "
        f"copies {beside('copies', '.3f')}  seen n-grams {beside('ngrams_seen', '.3f')}"
    )


def yardstick(cfg: EvalConfig, device: str, rank: int = 0, world: int = 1):
    """Sample (or read) every setting over the seeds, score it beside the reference, write
    report.json, report.md and the frontier plot to out_dir. Returns the report. Under torchrun
    the ranks split the sampling and the judge's passes; rank 0 alone decomposes and writes."""
    say = print if rank == 0 else lambda *a, **k: None
    seeds = comma_list("seeds", cfg.seeds)
    given = read_samples(cfg.samples) if cfg.samples else None
    model, encoder, meta = load_sampler(cfg.ckpt, device)
    prov = on_rank0(lambda: provenance(cfg.ckpt), rank, world)  # hashed once, by rank 0
    # the judge first: a bad judge stops the run before anything is written
    judge, tok = (
        load_judge(cfg.judge, device) if cfg.judge and cfg.decompose != "only" else (None, None)
    )
    decomp = None
    if cfg.decompose != "off" and not given and rank == 0:
        decomp = decomposition(
            cfg,
            model,
            encoder,
            meta,
            settings(cfg, meta["train"].get("sample_preset", "uncond32"))[0],
            device,
        )
    if cfg.decompose == "only":
        report = {"ckpt": cfg.ckpt, **prov, "decomposition": decomp}
        if rank == 0:
            write_json(os.path.join(cfg.out_dir, "report.json"), report)
            atomic_write_text(
                os.path.join(cfg.out_dir, "report.md"), "\n".join(markdown(decomp)) + "\n"
            )
        return report
    real, shuffled, train_docs, held = reference(meta, encoder, cfg.n, seeds, cfg.split)
    gram = novelty_gram(encoder, real[seeds[0]])
    # diversity is compared at one set size: the smallest set of the evaluation
    size = min(len(t) for t in [*real.values(), *(given or {}).values()])
    instrument, lm = make_instrument(meta, encoder, train_docs, held, real, size, device)
    score = lambda sets: score_sets(
        sets, judge, tok, encoder, train_docs, gram, rank, world, instrument
    )
    ref = {name: score(sets) for name, sets in (("real", real), ("shuffled", shuffled))}
    if judge:
        say(
            f"real text:     PPL {ref['real']['ppl']['mean']:.1f}  "
            f"entropy {ref['real']['entropy']['mean']:.3f}  "
            f"copies {ref['real']['copies']['mean']:.2f}  "
            f"(shuffled: PPL {ref['shuffled']['ppl']['mean']:.1f})"
        )
    say(f"held-out split '{cfg.split}': {len(held)} texts; diversity at {size} texts a set")
    for name in ("real", "shuffled"):
        say(show(f"{name} text", ref[name]))
    line = row_provenance(prov, cfg.judge, lm.name, cfg.split)
    rows = []
    if given:
        rows.append(
            {
                "setting": {"samples": cfg.samples},
                "examples": next(iter(given.values()))[:8],
                **score(given),
            }
        )
    else:
        for s in settings(cfg, meta["train"].get("sample_preset", "uncond32")):
            t0, sets = time.time(), {}
            for seed in seeds:  # the seed fixes the noise and the time grid
                kw = {
                    k: v
                    for k, v in s.items()
                    if k in ("sampler", "steps", "sc_cfg", "gamma", "grid")
                }
                res = sample_set(cfg, model, encoder, meta, kw, seed, prov, device, rank, world)
                sets[seed] = [r["text"] for r in res]
            rows.append(
                {
                    "setting": s,
                    "nfe": res[0]["nfe"],
                    "seconds": time.time() - t0,
                    "examples": sets[seeds[0]][:8],
                    **score(sets),
                }
            )
    for r in rows:
        with_ratios(r, ref["real"])
        r["provenance"] = line
        name = label(r["setting"]) if "sampler" in r["setting"] else "samples"
        if judge:
            say(
                f"{name}: PPL {r['ppl']['mean']:.1f} ({r['ppl_ratio']:.2f}x real)  "
                f"entropy {r['entropy']['mean']:.3f} ({r['entropy_ratio']:.2f}x)  "
                f"repetition {r['repetition']['mean']:.2f}  copies {r['copies']['mean']:.2f}",
                flush=True,
            )
        say(show(name, r, ref["real"]), flush=True)
    report = {
        "ckpt": cfg.ckpt,
        "judge": cfg.judge,
        "n": cfg.n,
        "seeds": seeds,
        "ngram": gram,
        "split": cfg.split,
        "matched_size": size,
        "second_judge": lm.name,
        "mauve_features": FEATURES,
        **prov,
        "reference": ref,
        "results": rows,
        "real_examples": real[seeds[0]][:8],
        "shuffled_examples": shuffled[seeds[0]][:4],
        **({"decomposition": decomp} if decomp else {}),
    }
    if rank == 0:
        write_json(os.path.join(cfg.out_dir, "report.json"), report)
        write_markdown(report, os.path.join(cfg.out_dir, "report.md"))
        plot(report, cfg.out_dir)
    return report


def heldout(cfg: EvalConfig, device: str):
    """Scoring of a conditional checkpoint: translate/summarise its first n held-out pairs under
    every setting (comma lists sweep, e.g. --guidance 1,1.5,2,3) and seed. Per setting: BLEU
    and ROUGE, mean and standard error over the seeds (the spread between sample sets), and
    the unigram entropy of the outputs in the encoder's tokens (the references' beside it),
    against the floors of lib/floors.py (retrieval of the nearest training pair's target, a
    source-blind constant, the source itself, its first k words). The pairs are the first n of
    cfg.split ('all'; 'dev' and 'test' leave out the 'near' duplicates of training pairs).
    Writes hypotheses.jsonl (every setting and seed), report.json,
    report.md and, for a sweep over guidance, guidance.png."""
    model, encoder, meta = load_sampler(cfg.ckpt, device)
    tcfg, dcfg = meta["train"], data_config(meta)
    sources, srcs, refs = heldout_pairs(dcfg, cfg.n, encoder.tokenizer, cfg.split)
    train = training_pairs(dcfg, encoder.tokenizer)
    # prints the floors; every text read back as the encoder writes it
    scorer = Scorer(srcs, refs, encoder.tokenize, train=train, read=encoder.read_back)
    rows, records, seeds = [], [], comma_list("seeds", cfg.seeds)
    for s in settings(cfg, cfg.preset or "cond64"):
        kw = {
            k: v
            for k, v in s.items()
            if k in ("sampler", "steps", "sc_cfg", "gamma", "grid", "guidance")
        }
        per_seed = []
        for seed in seeds:
            t0 = time.time()
            res = generate_conditional(
                model,
                encoder,
                sources,
                tcfg["max_length"],
                tcfg["max_input_length"],
                seed=seed,
                flow=FlowConfig(**meta["flow"]),
                batch_size=cfg.batch_size,
                progress=cfg.progress,
                **kw,
            )
            hyps = [r["text"] for r in res]
            per_seed.append(scorer.seed_scores(seed, hyps, time.time() - t0))
            records += [
                {
                    "setting": label(s),
                    "guidance": kw.get("guidance", 1.0),
                    "seed": seed,
                    "source": a,
                    "reference": b,
                    "text": h,
                }
                for a, b, h in zip(srcs, refs, hyps)
            ]
        rows.append(
            scorer.row(s, res[0]["nfe"], per_seed, f"{label(s)}, CFG {kw.get('guidance', 1.0):g}")
        )
    decomp = (
        decomposition(cfg, model, encoder, meta, rows[0]["setting"], device)
        if cfg.decompose != "off"
        else None
    )
    prov = provenance(cfg.ckpt)
    report = scorer.report(rows, records, seeds, split=cfg.split, ckpt=cfg.ckpt, **prov)
    report["provenance"] = row_provenance(prov, "", "", cfg.split)  # the machine, the date
    if cfg.diagnose:
        report["diagnostics"] = diagnostics(cfg, model, encoder, meta, rows[0], srcs, scorer, train)
    if decomp:
        report["decomposition"] = decomp
    write_report(cfg.out_dir, report, records)
    if len({r["setting"].get("guidance") for r in rows}) > 1:
        plot_guidance(report, cfg.out_dir)
    return report


def diagnostics(cfg: EvalConfig, model, encoder, meta, row, srcs, scorer, train) -> dict:
    """Has a conditional checkpoint fit its pairs, and does it read its source? At the first
    setting, sampling seed 0: its scores on its first n training pairs, against their targets
    as its training rows hold them (cut where the row ends: what it could learn) and against
    the whole targets (`train_full`: the row's length is a ceiling); on the held-out pairs
    with each source replaced by the next one's (the last by the first: every output is scored
    against another source's reference); and with the source zeroed (CFG's unconditional
    branch, guidance 0). A model that reads its source loses most of its score on both."""
    keys = ("sampler", "steps", "sc_cfg", "gamma", "grid", "guidance")
    kw, tcfg = {k: v for k, v in row["setting"].items() if k in keys}, meta["train"]

    def draw(sources, **over):
        t0 = time.time()
        res = generate_conditional(
            model,
            encoder,
            sources,
            tcfg["max_length"],
            tcfg["max_input_length"],
            seed=0,
            flow=FlowConfig(**meta["flow"]),
            batch_size=cfg.batch_size,
            **{**kw, **over},
        )
        return [r["text"] for r in res], time.time() - t0

    n = min(cfg.n, len(train[0]), tcfg.get("train_pairs") or len(train[0]))  # pairs it saw
    pairs = list(zip(train[0][:n], train[1][:n]))
    rows = layout(pairs, encoder, tcfg["max_length"], tcfg["max_input_length"])
    seen = [encoder.detokenize(r[c:k]) for r, c, k in zip(rows.ids, rows.cond_len, rows.length)]
    score = lambda refs, hyps: Scorer(
        train[0][:n], refs, encoder.tokenize, log=False, read=encoder.read_back
    ).seed_scores(0, *hyps)
    out = {"setting": row["setting"], "heldout": row["per_seed"][0]}
    hyps = draw(train[0][:n])
    out["train"], out["train_full"] = score(seen, hyps), score(train[1][:n], hyps)
    out["shuffled"] = scorer.seed_scores(0, *draw(srcs[1:] + srcs[:1]))
    out["zeroed"] = scorer.seed_scores(0, *draw(srcs, guidance=0.0))
    for name in ("heldout", "train", "train_full", "shuffled", "zeroed"):
        d = out[name]
        print(
            f"{'diagnostic: ' + name:>40}: BLEU {d['bleu']:6.2f}  ROUGE-1/2/L "
            + " / ".join(f"{d[m]:.2f}" for m in ("rouge1", "rouge2", "rougeL"))
        )
    return out


@torch.no_grad()
def ode_end(model, z, steps: int, sc_cfg: float, flow, grid: str = "uniform", seed: int = 0):
    """End point of the Euler ODE from noise z on a time grid of `steps` steps."""
    g = torch.Generator(z.device).manual_seed(seed)
    return sample_latents(
        Denoiser(model, sc_cfg, flow=flow), z, time_grid(steps, grid, flow, g, z.device)
    )[0]


def distill_report(cfg: EvalConfig, device: str):
    """Few-step students against their teacher: for the teacher (--ckpt), every round of
    --distill and every round of --control (distill.py --objective flow: the same rounds on the
    teacher's own loss), at each of distill_steps, the trajectory error (RMS over all latent
    entries of the n-step Euler ODE end point minus the teacher's traj_ref_steps-step one on the
    uniform grid, from the same noise) and the yardstick of the fewstep<n> preset (grid: the
    preset's, or --grid): the n-gram judge, MAUVE and diversity at a matched size on cfg.split,
    and Gen. PPL when --judge is given. Writes report.json and report.md to out_dir."""
    kinds = {"sampler": str, "sc_cfg": float, "gamma": float, "grid": str}
    fixed = {
        k: comma_list(k, getattr(cfg, k), kind) for k, kind in kinds.items() if getattr(cfg, k)
    }
    if any(len(v) > 1 for v in fixed.values()) or cfg.steps or cfg.preset:
        raise ValueError(
            "--distill scores at --distill_steps, each with its fewstep preset: "
            "--sampler, --sc_cfg, --gamma, --grid override it with one value each"
        )
    fixed = {k: v[0] for k, v in fixed.items()}
    named = [("teacher", None)]  # (row name, checkpoint folder), refused before any loading
    students = [("", cfg.distill)] + ([("control/", cfg.control)] if cfg.control else [])
    for prefix, folder in students:
        named += [(prefix + r, os.path.join(folder, r)) for r in rounds_of(folder)]
    teacher, encoder, meta = load_sampler(cfg.ckpt, device)
    prov = provenance(cfg.ckpt)
    judge, tok = load_judge(cfg.judge, device) if cfg.judge else (None, None)
    seeds = comma_list("seeds", cfg.seeds)
    flow, length = FlowConfig(**meta["flow"]), meta["train"]["max_length"]
    real, _, train_docs, held = reference(meta, encoder, cfg.n, seeds, cfg.split)
    gram = novelty_gram(encoder, real[seeds[0]])
    size = min(len(t) for t in real.values())
    instrument, lm = make_instrument(meta, encoder, train_docs, held, real, size, device)
    score = lambda sets: score_sets(
        sets, judge, tok, encoder, train_docs, gram, instrument=instrument
    )
    real_scores = score(real)
    # one set of noise draws for every model: the trajectory error compares end points of
    # the same starting points, against the teacher's many-step (near-exact) ODE end point
    g = torch.Generator(device).manual_seed(0)
    z = flow.noise_scale * torch.randn(
        cfg.traj_n, length, meta["model"]["latent_dim"], generator=g, device=device
    )
    ref = ode_end(teacher, z, cfg.traj_ref_steps, cfg.traj_sc_cfg, flow)
    rows = []
    for name, folder in named:
        model = teacher if name == "teacher" else checkpoint.load(folder, device)[0]
        for n in comma_list("distill_steps", cfg.distill_steps):
            # the released few-step settings for n steps (8's for counts without a preset),
            # each key overridden where asked (--grid uniform: the student's own spans;
            # --sc_cfg 1 for a teacher trained without self-conditioning)
            preset = dict(PRESETS.get(f"fewstep{n}", dict(PRESETS["fewstep8"], steps=n)))
            preset.update(fixed)
            kw = {k: preset[k] for k in ("sampler", "steps", "gamma", "sc_cfg", "grid")}
            sets = {
                s: [
                    r["text"]
                    for r in generate(
                        model, encoder, n=cfg.n, length=length, seed=s, flow=flow, **kw
                    )
                ]
                for s in seeds
            }
            end = ode_end(model, z, n, cfg.traj_sc_cfg, flow, preset["grid"])
            row = {
                "model": name,
                "steps": n,
                "preset": kw,
                "traj_err": (end - ref).pow(2).mean().sqrt().item(),
                "example": sets[seeds[0]][0],
                **score(sets),
            }
            row["kn_ppl_ratio"] = row["kn_ppl"]["mean"] / real_scores["kn_ppl"]["mean"]
            rows.append(row)
            print(
                f"{name:>16} {n} steps: trajectory error {row['traj_err']:.4f}  "
                + (f"Gen. PPL {row['ppl']['mean']:.1f}  " if judge else "")
                + f"n-gram PPL {row['kn_ppl_ratio']:.2f}x real  "
                f"distinct-2 {row['distinct_2_matched']['mean']:.3f}  "
                f"MAUVE {row['mauve']['mean']:.3f}",
                flush=True,
            )
    report = {
        "teacher": cfg.ckpt,
        "teacher_seed": meta["train"]["seed"],  # its training seed: tables pair teachers by it
        "distill": cfg.distill,
        "control": cfg.control,
        "judge": cfg.judge,
        "second_judge": lm.name,
        "split": cfg.split,
        "grid": cfg.grid or "logit_normal (the presets')",
        "overrides": fixed,
        **prov,
        "provenance": row_provenance(prov, cfg.judge, lm.name, cfg.split),
        **{k: getattr(cfg, k) for k in ("n", "seeds", "traj_n", "traj_ref_steps", "traj_sc_cfg")},
        "real": real_scores,
        "rows": rows,
    }
    write_json(os.path.join(cfg.out_dir, "report.json"), report)
    gen_ppl = lambda r: f"{r['ppl']['mean']:.1f} ± {r['ppl']['se']:.1f} | " if judge else ""
    lines = [
        "| model | steps | trajectory error | "
        + ("Gen. PPL | " if judge else "")
        + "n-gram PPL / real | distinct-2 | MAUVE |",
        "|---|---|---|---|---|---|" + ("---|" if judge else ""),
    ]
    lines += [
        f"| {r['model']} | {r['steps']} | {r['traj_err']:.4f} | {gen_ppl(r)}"
        f"{r['kn_ppl_ratio']:.2f} | {r['distinct_2_matched']['mean']:.3f} | "
        f"{r['mauve']['mean']:.3f} |"
        for r in rows
    ]
    atomic_write_text(os.path.join(cfg.out_dir, "report.md"), "\n".join(lines) + "\n")
    return report


def rounds_of(folder: str) -> list:
    """A distill.py out_dir's rounds (round1, round2, ...), or a one-line error."""
    found = (
        sorted(d for d in os.listdir(folder) if d.startswith("round"))
        if os.path.isdir(folder)
        else []
    )
    if not found:
        raise FileNotFoundError(f"no distillation rounds (round1, round2, ...) in {folder}")
    return found


def main(argv):
    cfg = parse(argv, EvalConfig, "evaluate.py")
    for key in ("n", "batch_size", "traj_n", "traj_ref_steps", "decompose_n"):
        if getattr(cfg, key) <= 0:
            raise ValueError(f"{key} must be > 0, got {getattr(cfg, key)}")
    if cfg.n > MAX_SAMPLES:  # held in memory: refused before anything loads
        raise ValueError(f"n must be at most {MAX_SAMPLES:,}, got {cfg.n:,}")
    if cfg.decompose not in ("on", "only", "off"):
        raise ValueError(f"unknown decompose '{cfg.decompose}' (choose from on, only, off)")
    if not cfg.ckpt:
        raise ValueError(
            "give --ckpt: the checkpoint to sample, or whose data the --samples are compared with"
        )
    settings(cfg, "uncond32")  # bad settings fail here, before anything loads
    for key in ("seeds", "distill_steps"):
        comma_list(key, getattr(cfg, key))
    if cfg.samples and os.path.isdir(cfg.samples):  # a sampling run's folder: its samples
        cfg.samples = os.path.join(cfg.samples, "samples.jsonl")
    cfg.out_dir = cfg.out_dir or default_out_dir(cfg)
    Writer(cfg.out_dir, "out_dir", "eval").check()  # before sampling: the report needs a home
    path = os.path.join(cfg.ckpt, "config.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"no checkpoint at {cfg.ckpt}{what_is(cfg.ckpt) or ' (config.json missing)'}"
        )
    try:
        with open(path) as f:  # a conditional run is scored on its held-out pairs
            conditional = bool(json.load(f)["train"].get("max_input_length"))
    # JSONDecodeError is a ValueError
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(
            f"{path} is not a checkpoint's config ({type(e).__name__}): the checkpoint is damaged"
        ) from None
    # the held-out split: conditional pairs also have 'near', and score all pairs by default
    cfg.split = cfg.split or ("all" if conditional and not cfg.samples else "dev")
    splits = PAIR_SPLITS if conditional and not cfg.samples else SPLITS
    if cfg.split not in splits:
        raise ValueError(f"unknown split '{cfg.split}' (choose from {', '.join(splits)})")
    if cfg.control and not cfg.distill:
        raise ValueError("--control is scored beside the students of --distill: give --distill")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and (
        cfg.distill or (conditional and not cfg.samples)
    ):
        raise ValueError(
            "under torchrun evaluate.py splits the yardstick; "
            "--distill and conditional held-out scoring run in one process"
        )
    keep_other_reports(cfg)
    with (
        distributed(cfg.device) as (rank, world, device),
        Writer(cfg.out_dir, "out_dir", "eval") if rank == 0 else contextlib.nullcontext(),
    ):
        if cfg.distill:
            report = distill_report(cfg, device)
        else:
            report = (
                heldout(cfg, device)
                if conditional and not cfg.samples
                else yardstick(cfg, device, rank, world)
            )
    if rank == 0:  # what it evaluates, kept with it
        atomic_write_text(
            os.path.join(cfg.out_dir, "report.json"),
            json.dumps(
                {"evaluation": evaluation_of(cfg, report["ckpt_sha256"]), **report}, indent=2
            ),
        )
        print(f"wrote {cfg.out_dir}/report.json")
    return report


if __name__ == "__main__":
    cli(main)
