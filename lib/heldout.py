"""Held-out scoring of conditional generation (METHOD.md, "Evaluation"): the first n held-out
pairs of a run's data, of one split (lib/floors.py: 'all', or 'dev'/'test' without the 'near'
duplicates of training pairs); per sample set BLEU, ROUGE-1/2/L and the outputs' unigram
entropy; per setting the mean and standard error over seeds; beside the floors (given the
training pairs: retrieval, a source-blind constant, copying the source, its first k words;
without them the last two). evaluate.py scores conditional ELF with it, and the conditional
baselines (baselines/ar_cond.py, baselines/mdlm.py) score their outputs with it, so that the
three are scored alike.

    srcs, texts, refs = heldout_pairs(dcfg, 117, tokenizer, split="test")
    scorer = Scorer(texts, refs, tokenize, train=training_pairs(dcfg, tokenizer), read=read_back)
    row = scorer.row({"name": "greedy"}, nfe, {0: hyps}, {0: seconds})
    write_report(out_dir, scorer.report(rows, records, seeds))   # report.json, report.md
    score_baseline(dcfg, n, tokenizer, settings, draw, out_dir, seeds)   # a baseline's, whole
"""

import json
import os
import time

from conditional import layout
from lib.floors import floors, split_pairs, task_kind
from lib.metrics import bleu, entropy, mean_se, rouge
from lib.outputs import atomic_write_text
from lib.pairs import pair_tables
from lib.report import write_heldout_markdown, write_json

METRICS = ("bleu", "bleu_cased", "entropy", "rouge1", "rouge2", "rougeL")


MAX_TRAIN = 200_000  # training pairs the floors and the split compare with (all: bundled sets)


def as_text(s, tokenizer) -> str:
    """A pair's side as text (pairs may be held as token ids)."""
    return s if isinstance(s, str) else tokenizer.decode(s, skip_special_tokens=True)


def training_pairs(dcfg, tokenizer, tables=None):
    """(sources, targets) of a data config's first MAX_TRAIN training pairs, as texts."""
    train = (tables or pair_tables(dcfg))[0]
    train = train.select(range(min(len(train), MAX_TRAIN)))
    return (
        [as_text(s, tokenizer) for s in train["source"]],
        [as_text(t, tokenizer) for t in train["target"]],
    )


def split_indices(dcfg, tokenizer, split: str = "all", tables=None) -> list:
    """The indices, in order, of a data config's held-out pairs in a split (lib/floors.py:
    'all', 'dev', 'test', 'near'): heldout_pairs' pairs, and the rows the conditional GPT-2
    stops early on (baselines/ar_cond.py)."""
    tables = tables or pair_tables(dcfg)
    sources = tables[1]["source"]
    if split == "all":
        return list(range(len(sources)))
    # which held-out sources are near a training source, which dev or test
    train_srcs, train_tgts = training_pairs(dcfg, tokenizer, tables)
    texts = [as_text(s, tokenizer) for s in sources]
    return split_pairs(train_srcs, texts, split, task_kind(train_srcs, train_tgts))


def heldout_pairs(dcfg, n: int, tokenizer, split: str = "all"):
    """The first n held-out pairs of a data config in a split (lib/floors.py: 'all', 'dev',
    'test', 'near') -> (sources as generation takes them, text or token ids; source texts;
    reference texts). `tokenizer` decodes pairs held as ids."""
    tables = pair_tables(dcfg)
    val = tables[1]
    keep = split_indices(dcfg, tokenizer, split, tables)
    sources, targets = val["source"], val["target"]
    pairs = [(sources[i], targets[i]) for i in keep[:n]]
    if not pairs:
        raise ValueError(f"data set '{dcfg.dataset}' has no held-out pairs in split '{split}'")
    return (
        [p[0] for p in pairs],
        [as_text(p[0], tokenizer) for p in pairs],
        [as_text(p[1], tokenizer) for p in pairs],
    )


def show(name, sc, mean=lambda v: v):
    """One printed line of scores."""
    print(
        f"{name:>40}: BLEU {mean(sc['bleu']):6.2f}  ROUGE-1/2/L "
        + " / ".join(f"{sc[m]['mean']:.2f}" for m in ("rouge1", "rouge2", "rougeL"))
        + f"  entropy {mean(sc['entropy']):.3f}"
    )


class Scorer:
    """Scores outputs against the references of one set of held-out pairs; `tokenize` (texts ->
    id lists, the encoder's tokens) is what the entropy counts; `train`, the training pairs'
    (sources, targets) as texts, adds the floors that need them (lib/floors.py). `read` (texts ->
    texts, the encoder's read_back) puts references, floors and outputs in one form before
    BLEU and ROUGE: a model over an uncased WordPiece writes "it ' s" and "well - known", which
    raw references would count as errors (MiniLM: every token right scored BLEU 84.0 on de->en
    against the raw references, 80.2 on the summaries) while the floors, copied from raw text,
    would not pay it."""

    def __init__(self, srcs, refs, tokenize, log=True, train=None, read=None):
        self.read = read or (lambda texts: list(texts))
        self.srcs, self.refs, self.tokenize = srcs, self.read(refs), tokenize
        if train:  # the four floors of lib/floors.py, from the training pairs alone
            trivial = floors(*train, srcs)
        else:
            # two trivial systems as the floor: copying the source, and its first k words, k
            # the references' median length (a summariser that cannot beat lead-k has learned
            # little)
            k = sorted(len(r.split()) for r in refs)[len(refs) // 2]
            lead = [" ".join(s.split()[:k]) for s in srcs]
            trivial = {"copy_source": srcs, f"lead_{k}_words": lead}
        self.baselines = {
            name: {**self.scores(hyps), "entropy": self.entropy(hyps)}
            for name, hyps in trivial.items()
        }
        self.reference_entropy = self.entropy(refs)
        if log:
            for name, sc in self.baselines.items():
                show(name, sc)
            print(f"{'references':>40}: entropy {self.reference_entropy:.3f}")

    def entropy(self, texts) -> float:
        return entropy(self.tokenize(texts))

    def scores(self, hyps) -> dict:
        """BLEU (lowercased and cased) and ROUGE-1/2/L (mean, se over examples) of one set."""
        hyps = self.read(hyps)
        out = bleu(hyps, self.refs)
        out.update({m: {"mean": a, "se": b} for m, (a, b) in rouge(hyps, self.refs).items()})
        return out

    def seed_scores(self, seed: int, hyps, seconds: float) -> dict:
        """One seed's sample set -> its figures (ROUGE as its mean over examples)."""
        sc = self.scores(hyps)
        return {
            "seed": seed,
            "seconds": seconds,
            "bleu": sc["bleu"],
            "bleu_cased": sc["bleu_cased"],
            "entropy": self.entropy(hyps),
            **{m: sc[m]["mean"] for m in ("rouge1", "rouge2", "rougeL")},
        }

    @staticmethod
    def row(setting: dict, nfe, per_seed: list, name: str = "") -> dict:
        """A setting's row: every figure's mean and standard error over the seeds' sets."""
        row = {
            m: dict(zip(("mean", "se"), mean_se([p[m] for p in per_seed])))
            for m in per_seed[0]
            if m != "seed"
        }
        row = {"setting": setting, "nfe": nfe, **row, "per_seed": per_seed}
        show(name or setting.get("name", ""), row, lambda v: v["mean"])
        return row

    def report(self, rows: list, records: list, seeds, **extra) -> dict:
        """The report evaluate.py writes for a conditional checkpoint."""
        return {
            **extra,
            "n": len(self.refs),
            "seeds": seeds,
            "baselines": self.baselines,
            "reference_entropy": self.reference_entropy,
            "results": rows,
            "examples": records[:8],
        }


def write_report(out_dir: str, report: dict, records: list):
    """hypotheses.jsonl (every setting and seed: source, reference, text), report.json and
    report.md in out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    atomic_write_text(
        os.path.join(out_dir, "hypotheses.jsonl"), "".join(json.dumps(r) + "\n" for r in records)
    )
    write_json(os.path.join(out_dir, "report.json"), report)
    write_heldout_markdown(report, os.path.join(out_dir, "report.md"))


def score_baseline(
    dcfg, n: int, tokenizer, settings, draw, out_dir: str, seeds, split: str = "all", **extra
):
    """A conditional baseline's held-out report: the first n held-out pairs of dcfg's split laid
    out as [source ; room for the target] rows, each (setting, its seeds, how) of `settings`
    drawn by draw(rows, cap, how, seed) -> [{"text", "nfe"}] (cap: the target's room), scored
    beside the floors and written to out_dir/heldout/ (hypotheses.jsonl, report.json,
    report.md)."""
    sources, srcs, refs = heldout_pairs(dcfg, n, tokenizer.tokenizer, split)
    train = training_pairs(dcfg, tokenizer.tokenizer)
    scorer = Scorer(srcs, refs, tokenizer.tokenize, train=train, read=tokenizer.read_back)
    rows = layout([(s, []) for s in sources], tokenizer, dcfg.max_length, dcfg.max_input_length)
    cap, results, records = dcfg.max_length - dcfg.max_input_length, [], []
    for setting, setting_seeds, how in settings:
        per_seed = []
        for seed in setting_seeds:
            t0 = time.time()
            res = draw(rows, cap, how, seed)
            hyps = [r["text"] for r in res]
            per_seed.append(scorer.seed_scores(seed, hyps, time.time() - t0))
            records += [
                {"setting": setting["name"], "seed": seed, "source": a, "reference": b, "text": h}
                for a, b, h in zip(srcs, refs, hyps)
            ]
        nfe = round(sum(r["nfe"] for r in res) / len(res), 1)  # mean forwards a row
        results.append(scorer.row(setting, nfe, per_seed))
    report = scorer.report(results, records, seeds, split=split, **extra)
    write_report(os.path.join(out_dir, "heldout"), report, records)
    print(f"wrote {os.path.join(out_dir, 'heldout', 'report.md')}")
    return report
