"""Evaluation of ELF samples (ELF_SPEC §9): Gen. PPL, entropy, distinct-n, BLEU, ROUGE, and sweeps.

    python evaluate.py --samples samples.jsonl --judge gpt2-large          # score a sample.py file
    python evaluate.py --ckpt out/tiny --judge judge/ --steps 8,16,32,64 --sc_cfg 1,2,3 \\
        --sampler ode,sde --seeds 0,1,2 --n 200 --out_dir eval/tiny         # sweep: JSON report + plots
    python evaluate.py --train_judge --data wiki --out judge/               # a small offline judge
    python evaluate.py --ckpt out/de_en_tiny --n 117 --out_dir eval/de_en   # §6: BLEU/ROUGE + baselines

Gen. PPL (§9): each text is re-tokenized by the judge causal LM, truncated to 1024 tokens,
and scored by its token NLL, excluding the first token (nothing predicts it) and every
token after the first EOS; PPL = exp(sum NLL / sum tokens) over all samples
(token-weighted). The per-sequence mean PPL, mean_i exp(NLL_i / n_i), another aggregation
in the literature, is reported separately as `ppl_seq_mean`. Entropy: the unigram entropy
(nats) of each text's judge token ids, averaged. distinct-n: unique / total n-grams of
judge token ids over the whole set. BLEU: sacrebleu corpus BLEU, lowercased (as the
authors) and cased. ROUGE-1/2/L: rouge-score F1 with stemming, x100, mean and standard
error over examples.
"""

import argparse
import hashlib
import json
import math
import os
import subprocess
import time
from collections import Counter

import torch

# ----------------------------------------------------------------------------------------
# the judge and its metrics


def load_judge(name_or_path: str, device="cpu"):
    """Any Hugging Face causal LM, by hub name (the paper: gpt2-large) or local folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    try:
        tok = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path).to(device).eval()
    except OSError as e:
        raise FileNotFoundError(f"could not load judge '{name_or_path}': {str(e).splitlines()[0]}") from None
    return model, tok


def judge_ids(texts, tok, max_len: int = 1024):
    """Re-tokenize with the judge's tokenizer, truncate, and cut after the first EOS (kept)."""
    eos = tok.eos_token_id
    out = []
    for ids in tok(list(texts), add_special_tokens=False)["input_ids"]:
        ids = ids[:max_len]
        if eos is not None and eos in ids:
            ids = ids[:ids.index(eos) + 1]
        out.append(ids)
    return out


@torch.no_grad()
def gen_ppl(texts, model, tok, batch_size: int = 16, max_len: int = 1024):
    """Token-weighted Gen. PPL and the per-sequence mean PPL (see the module docstring)."""
    device = next(model.parameters()).device
    seqs = judge_ids(texts, tok, max_len)
    nll_sum, n_tok, seq_ppl = 0.0, 0, []
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))     # batch similar lengths
    for s in range(0, len(order), batch_size):
        batch = [seqs[i] for i in order[s:s + batch_size]]
        L = max(len(b) for b in batch)
        ids = torch.zeros(len(batch), L, dtype=torch.long)
        mask = torch.zeros(len(batch), L, dtype=torch.bool)
        for j, b in enumerate(batch):
            ids[j, :len(b)], mask[j, :len(b)] = torch.tensor(b, dtype=torch.long), True
        ids, mask = ids.to(device), mask.to(device)
        logits = model(input_ids=ids, attention_mask=mask.long()).logits.float()
        nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        m = mask[:, 1:]                                                # token 0 is never scored
        nll = (nll * m).sum(1).cpu()
        n = m.sum(1).cpu()
        nll_sum, n_tok = nll_sum + nll.sum().item(), n_tok + int(n.sum())
        seq_ppl += [math.exp(a / b) for a, b in zip(nll.tolist(), n.tolist()) if b > 0]
    return {"ppl": math.exp(nll_sum / max(n_tok, 1)), "ppl_seq_mean": sum(seq_ppl) / max(len(seq_ppl), 1),
            "n_tokens": n_tok}


def entropy(token_lists):
    """Mean over samples of the unigram entropy (nats) of each sample's tokens."""
    ents = []
    for ids in token_lists:
        if not ids:
            continue
        counts = torch.tensor(list(Counter(ids).values()), dtype=torch.float64)
        p = counts / counts.sum()
        ents.append(-(p * p.log()).sum().item())
    return sum(ents) / max(len(ents), 1)


def distinct_n(token_lists, n: int):
    """Unique n-grams / all n-grams over the whole set (0 when there is none)."""
    grams = [tuple(ids[i:i + n]) for ids in token_lists for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def mean_se(values):
    """(mean, standard error of the mean)."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def bleu(hyps, refs):
    """sacrebleu corpus BLEU, lowercased (as the authors) and cased."""
    import sacrebleu
    return {"bleu": sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score,
            "bleu_cased": sacrebleu.corpus_bleu(hyps, [refs]).score}


def rouge(hyps, refs):
    """ROUGE-1/2/L F1 x100 with stemming: {name: (mean, standard error)} over examples."""
    from rouge_score import rouge_scorer
    sc = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = [sc.score(r, h) for h, r in zip(hyps, refs)]
    return {k: mean_se([100 * s[k].fmeasure for s in scores]) for k in ("rouge1", "rouge2", "rougeL")}


def score_texts(texts, judge, tok, refs=None, batch_size=16):
    """All metrics of one set of samples."""
    ids = judge_ids(texts, tok)
    out = {**gen_ppl(texts, judge, tok, batch_size), "entropy": entropy(ids)}
    out.update({f"distinct_{n}": distinct_n(ids, n) for n in (1, 2, 3, 4)})
    if refs is not None:
        out.update(bleu(texts, refs))
        for k, (m, se) in rouge(texts, refs).items():
            out[k], out[f"{k}_se"] = m, se
    return out


# ----------------------------------------------------------------------------------------
# an offline judge: a small GPT-2 with its own byte-level BPE, fitted on a text corpus

def train_judge(data="wiki", out="judge", steps=400, batch_size=32, length=128, vocab=8192, lr=1e-3, seed=0):
    """Fit a small GPT-2-style judge on the training split of `data` (the held-out split is
    excluded) and save it with its tokenizer; returns the held-out perplexity."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
    from data import load_documents
    from tqdm import tqdm
    torch.manual_seed(seed)
    train_docs, val_docs = load_documents(data)
    col = "text" if "text" in train_docs.column_names else train_docs.column_names[0]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer, bpe.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    bpe.train_from_iterator(list(train_docs[col]), trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                  pad_token="<|endoftext|>")

    def rows(docs):  # documents joined by EOS, cut into (N, length) rows
        flat = [i for ids in tok(list(docs[col]))["input_ids"] for i in ids + [tok.eos_token_id]]
        n = len(flat) // length
        return torch.tensor(flat[:n * length]).view(n, length)

    train, val = rows(train_docs), rows(val_docs)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=length, n_embd=256, n_layer=4, n_head=4,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    bar = tqdm(range(steps), desc="judge")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 50)
        batch = train[torch.randint(len(train), (batch_size,), generator=g)]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    with torch.no_grad():
        val_loss = sum(model(input_ids=val[i:i + 64], labels=val[i:i + 64]).loss.item() * len(val[i:i + 64])
                       for i in range(0, len(val), 64)) / len(val)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    print(f"judge: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params, {steps} steps, "
          f"held-out PPL {math.exp(val_loss):.1f}; saved to {out}")
    return math.exp(val_loss)


# ----------------------------------------------------------------------------------------
# harness: score a samples file, or sweep sampler settings over seeds

def provenance(ckpt=None):
    """The git commit of this code and a hash of the checkpoint's weights."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                    capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", None
    out = {"git_commit": commit, "git_dirty": dirty}
    if ckpt:
        h = hashlib.sha256()
        with open(os.path.join(ckpt, "model.safetensors"), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        out["ckpt_sha256"] = h.hexdigest()
    return out


def write_json(path, obj):
    from model import atomic_write_text
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write_text(path, json.dumps(obj, indent=2))


def score_file(path, judge_name, device="cpu", report=None):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no samples file at {path}")
    with open(path) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    if not recs:
        raise ValueError(f"samples file {path} is empty")
    judge, tok = load_judge(judge_name, device)
    refs = [r["reference"] for r in recs] if all("reference" in r for r in recs) else None
    scores = score_texts([r["text"] for r in recs], judge, tok, refs)
    result = {"samples": os.path.abspath(path), "n": len(recs), "judge": judge_name, **provenance(), **scores}
    write_json(report or os.path.splitext(path)[0] + ".scores.json", result)
    return result


def sweep(ckpt, judge_name, steps=(8, 16, 32, 64), sc_cfg=(1.0, 2.0, 3.0), samplers=("ode", "sde"), seeds=(0, 1, 2),
          n=200, gamma=1.5, grid="logit_normal_quantile", out_dir="eval", device="cpu", length=None, batch_size=64):
    """Generate and score every (sampler, steps, sc_cfg) over seeds; write report.json and
    the two plots to out_dir. Returns the report."""
    from sample import generate, load_sampler
    model, encoder, meta = load_sampler(ckpt, device)
    judge, tok = load_judge(judge_name, device)
    length = length or meta["train"]["max_length"]
    results = []
    for sampler in samplers:
        for st in steps:
            for w in sc_cfg:
                per_seed = []
                for seed in seeds:
                    t0 = time.time()
                    res = generate(model, encoder, n=n, length=length, steps=st, sampler=sampler, gamma=gamma,
                                   sc_cfg=w, grid=grid, seed=seed, batch_size=batch_size,
                                   noise_scale=meta["flow"]["noise_scale"])
                    per_seed.append({"seed": seed, "nfe": res[0]["nfe"], "seconds": time.time() - t0,
                                     **score_texts([r["text"] for r in res], judge, tok)})
                agg = {k: mean_se([p[k] for p in per_seed]) for k in per_seed[0] if k not in ("seed", "nfe")}
                results.append({"sampler": sampler, "steps": st, "sc_cfg": w, "nfe": per_seed[0]["nfe"],
                                **{k: {"mean": m, "se": se} for k, (m, se) in agg.items()},
                                "example": res[0]["text"], "per_seed": per_seed})
                r = results[-1]
                print(f"{sampler:>4} steps {st:>3} sc_cfg {w:g}: PPL {r['ppl']['mean']:.1f} ± {r['ppl']['se']:.1f}  "
                      f"entropy {r['entropy']['mean']:.3f} ± {r['entropy']['se']:.3f}")
    report = {"ckpt": os.path.abspath(ckpt), "judge": judge_name, **provenance(ckpt),
              "config": dict(steps=list(steps), sc_cfg=list(sc_cfg), samplers=list(samplers), seeds=list(seeds),
                             n=n, gamma=gamma, grid=grid, length=length), "results": results}
    write_json(os.path.join(out_dir, "report.json"), report)
    plot(report, out_dir)
    return report


def heldout(ckpt, n=200, out_dir="eval", preset="cond64", steps=None, cfg=None, seed=0, device="cpu", batch_size=64):
    """§6 scoring of a conditional checkpoint: translate/summarise its first n held-out pairs,
    write hypotheses.jsonl (source, reference, text) and report.json: BLEU and ROUGE of the
    outputs beside two trivial baselines, the source itself and its first k words (k = the
    references' median length in words)."""
    from types import SimpleNamespace
    from data import load_pairs
    from model import atomic_write_text
    from sample import PRESETS, load_sampler, translate
    model, encoder, meta = load_sampler(ckpt, device)
    tcfg = meta["train"]
    if not tcfg.get("max_input_length"):
        raise ValueError(f"checkpoint {ckpt} is unconditional (max_input_length 0): score it with --judge")
    pairs = load_pairs(SimpleNamespace(**tcfg))[1][:n]
    if not pairs:
        raise ValueError(f"checkpoint {ckpt}: its data set '{tcfg['dataset']}' has no held-out pairs")
    text = lambda s: s if isinstance(s, str) else encoder.tokenizer.decode(s, skip_special_tokens=True)
    srcs, refs = [text(p[0]) for p in pairs], [text(p[1]) for p in pairs]
    settings = {**PRESETS[preset], **({"steps": steps} if steps else {}), **({"cfg": cfg} if cfg is not None else {})}
    t0 = time.time()
    res = translate(model, encoder, [p[0] for p in pairs], tcfg["max_length"], tcfg["max_input_length"], seed=seed,
                    noise_scale=meta["flow"]["noise_scale"], batch_size=batch_size, progress=True, **settings)
    seconds = time.time() - t0
    k = sorted(len(r.split()) for r in refs)[len(refs) // 2]
    systems = {"elf": [r["text"] for r in res], "copy_source": srcs,
               f"lead_{k}_words": [" ".join(s.split()[:k]) for s in srcs]}
    scores = {}
    for name, hyps in systems.items():
        scores[name] = bleu(hyps, refs)
        scores[name].update({m: {"mean": a, "se": b} for m, (a, b) in rouge(hyps, refs).items()})
        print(f"{name:>16}: BLEU {scores[name]['bleu']:6.2f}  ROUGE-1/2/L " +
              " / ".join(f"{scores[name][m]['mean']:.2f}" for m in ("rouge1", "rouge2", "rougeL")))
    records = [{"source": s, "reference": r, "text": h["text"]} for s, r, h in zip(srcs, refs, res)]
    os.makedirs(out_dir, exist_ok=True)
    atomic_write_text(os.path.join(out_dir, "hypotheses.jsonl"), "".join(json.dumps(r) + "\n" for r in records))
    report = {"ckpt": os.path.abspath(ckpt), **provenance(ckpt), "n": len(pairs), "preset": preset, "seed": seed,
              "settings": settings, "nfe": res[0]["nfe"], "seconds": seconds, "scores": scores,
              "examples": records[:8]}
    write_json(os.path.join(out_dir, "report.json"), report)
    return report


def plot(report, out_dir):
    """ppl_vs_entropy.png (the quality-diversity frontier) and ppl_vs_steps.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    res = report["results"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for sampler, marker in zip(sorted({r["sampler"] for r in res}), "os^D"):
        rs = [r for r in res if r["sampler"] == sampler]
        ax.errorbar([r["entropy"]["mean"] for r in rs], [r["ppl"]["mean"] for r in rs],
                    xerr=[r["entropy"]["se"] for r in rs], yerr=[r["ppl"]["se"] for r in rs],
                    fmt=marker, label=sampler, capsize=2)
        for r in rs:
            ax.annotate(f"{r['steps']}/{r['sc_cfg']:g}", (r["entropy"]["mean"], r["ppl"]["mean"]), fontsize=6)
    ax.set(xlabel="unigram entropy (higher: more diverse)", ylabel="Gen. PPL (lower: better)", yscale="log",
           title="quality vs diversity (labels: steps/SC-CFG)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "ppl_vs_entropy.png"), dpi=120)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for sampler in sorted({r["sampler"] for r in res}):
        for w in sorted({r["sc_cfg"] for r in res}):
            rs = sorted((r for r in res if r["sampler"] == sampler and r["sc_cfg"] == w), key=lambda r: r["steps"])
            ax.errorbar([r["steps"] for r in rs], [r["ppl"]["mean"] for r in rs], yerr=[r["ppl"]["se"] for r in rs],
                        marker="o", capsize=2, label=f"{sampler}, SC-CFG {w:g}")
    ax.set(xlabel="steps", ylabel="Gen. PPL", xscale="log", yscale="log", title="Gen. PPL against steps")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "ppl_vs_steps.png"), dpi=120)
    plt.close("all")


def conditional(ckpt) -> bool:
    """Whether a checkpoint folder was trained for conditional generation (§6)."""
    path = os.path.join(ckpt, "config.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {ckpt} (config.json missing)")
    with open(path) as f:
        return bool(json.load(f)["train"].get("max_input_length"))


def main(argv=None):
    p = argparse.ArgumentParser(description="Score ELF samples (ELF_SPEC §9).")
    p.add_argument("--samples", help="a JSONL file written by sample.py (a 'reference' field adds BLEU/ROUGE)")
    p.add_argument("--ckpt", help="sweep sampler settings for this checkpoint; a conditional one (§6) is "
                                  "scored on its held-out pairs (BLEU, ROUGE, baselines) instead")
    p.add_argument("--judge", help="a causal LM: hub name (gpt2-large) or local folder")
    p.add_argument("--steps", help="sweep: a list (default 8,16,32,64); conditional: one number")
    p.add_argument("--sc_cfg", default="1,2,3")
    p.add_argument("--sampler", default="ode,sde")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--gamma", type=float, default=1.5)
    p.add_argument("--preset", default="cond64", help="conditional: the sample.py preset")
    p.add_argument("--cfg", type=float, help="conditional: the CFG scale (default: the preset's)")
    p.add_argument("--grid", default="logit_normal_quantile")
    p.add_argument("--out_dir", default="eval")
    p.add_argument("--report", help="with --samples: where to write the scores (default: beside the file)")
    p.add_argument("--train_judge", action="store_true", help="fit a small GPT-2 judge on --data")
    p.add_argument("--data", default="wiki")
    p.add_argument("--out", default="judge")
    p.add_argument("--judge_steps", type=int, default=400)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args(argv)
    if a.train_judge:
        return train_judge(a.data, a.out, a.judge_steps)
    if a.ckpt and conditional(a.ckpt):
        heldout(a.ckpt, a.n, a.out_dir, a.preset, int(a.steps) if a.steps else None, a.cfg, device=a.device)
        return print(f"wrote {a.out_dir}/hypotheses.jsonl and report.json")
    if not a.judge:
        p.error("--judge is required (or --train_judge to make one)")
    if a.samples:
        print(json.dumps(score_file(a.samples, a.judge, a.device, a.report), indent=2))
    elif a.ckpt:
        nums = lambda s, f: tuple(f(x) for x in s.split(","))
        sweep(a.ckpt, a.judge, nums(a.steps or "8,16,32,64", int), nums(a.sc_cfg, float), nums(a.sampler, str),
              nums(a.seeds, int), a.n, a.gamma, a.grid, a.out_dir, a.device)
        print(f"wrote {a.out_dir}/report.json, ppl_vs_entropy.png, ppl_vs_steps.png")
    else:
        p.error("give --samples, --ckpt or --train_judge")


if __name__ == "__main__":
    import sys
    try:
        main()
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
