"""The cost benchmark's driver (results/cost/README.md, issue 58): for each system and sampler
setting, the seconds one sample takes alone (batch 1, the median of repeats after a warm-up call),
samples per second at batch 64, peak memory, and the quality of the batch-64 samples on the dev
split, scored as evaluate.py scores them (lib/reference.py: the n-gram judge's PPL over real
text's, MAUVE, distinct-2 at a matched size, length, copies; Gen. PPL with --judge).

    python results/cost/measure.py --elf out/tiny --mdlm out/mdlm_tiny --ar out/ar_tiny \
        --distill out/distill_tiny --length 16 --out runs/cost/desc       # trained checkpoints
    python results/cost/measure.py --cost_only --shape elf-b --lengths 16,64,1024 \
        --out runs/cost/gpu                                                # random weights
    python results/cost/table.py --collect runs/cost    # table.json, table.md, the plots

The systems: ELF (Euler ODE, Heun, the released SDE), its distilled students (the last round of
--distill, fewstep<n> presets), MDLM (ancestral, uniform grid) and the AR GPT-2 (KV cache at
several temperatures, once without the cache). Each is loaded from its checkpoint folder alone,
so the driver measures whatever was trained. --cost_only builds random weights of --shape
instead (elf-b: the paper's ELF-B over T5-small's D 512 and V 32128, MDLM of ELF-B's trunk, a
GPT-2-small AR; test: tiny shapes for the tests) and measures cost alone: a random AR rarely
draws EOS, so its rows run their full length, its worst case. On CUDA every sampler runs under
bf16 autocast, ELF and MDLM compiled (torch.compile; the AR's cache grows every step, so it stays
eager unless --compile_ar): the warm-up call's seconds, compile included, are kept as `first_s`.

Memory: on CUDA the peak of torch.cuda.max_memory_allocated over a call, on a CPU the process's
peak RSS (VmHWM of /proc/self/status, reset before each call by writing 5 to
/proc/self/clear_refs), each reported above what the process held before the call (`peak_mb`:
the sampler's working memory; `weights_mb`: the system's parameters and buffers, beside it).
Rows land in OUT/measure.json as they are measured; a rerun with the same settings keeps them.
"""

import json
import os
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import evaluate  # noqa: E402  (the repository root, above)
from baselines import ar, mdlm, mdlm_model  # noqa: E402
from encoder import Tokenizer  # noqa: E402
from flow import PRESETS, FlowConfig  # noqa: E402
from lib import checkpoint  # noqa: E402
from lib.config import comma_list, parse, resolve_device  # noqa: E402
from lib.guard import cli  # noqa: E402
from lib.mauve_score import features  # noqa: E402
from lib.metrics import load_judge  # noqa: E402
from lib.ngram import fit_cached  # noqa: E402
from lib.outputs import atomic_write_text, sha256  # noqa: E402
from lib.reference import (  # noqa: E402
    Instrument,
    data_config,
    novelty_gram,
    reference,
    score_sets,
    with_ratios,
)
from lib.report import machine  # noqa: E402
from model import ELF, SIZES, ELFConfig  # noqa: E402
from sample import generate, load_sampler  # noqa: E402
from tools.timing import sync  # noqa: E402

SYSTEMS = ("elf", "distill", "mdlm", "ar")
# random-weight shapes of --cost_only: ELF's model, MDLM's trunk, AR's GPT-2, one vocabulary
SHAPES = {
    "elf-b": dict(D=512, V=32128, elf=SIZES["ELF-B"], trunk=(768, 12, 12)),
    "test": dict(D=16, V=64, elf=dict(depth=1, hidden=32, heads=2), trunk=(32, 1, 2)),
}
KEEP = (  # the quality figures a row keeps (mean and s.e. over seeds), beside the ratios
    "kn_ppl",
    "mauve",
    "distinct_2_matched",
    "length",
    "copies",
    "ngrams_seen",
    "repetition",
    "entropy",
    "ppl",
)


@dataclass
class CostConfig:
    """Latency, throughput, memory and quality of ELF, its students, MDLM and AR."""

    elf: str = ""  # ELF checkpoint (train.py out_dir); its data is the quality's reference
    distill: str = ""  # distill.py out_dir: its last round, at distill_steps
    mdlm: str = ""  # baselines.mdlm out_dir
    ar: str = ""  # baselines.ar out folder
    judge: str = ""  # a GPT-2 judge: Gen. PPL too ('': the n-gram judge, MAUVE, the rest)
    length: int = 16  # tokens a sample: the checkpoints' max_length (AR: length - 1 new ones)
    out: str = "runs/cost/run"  # measure.json goes here
    split: str = "dev"  # held-out text the quality is read against (dev, test, all)
    n: int = 64  # samples per seed, scored; drawn at `batch` a call
    seeds: str = "0,1,2"  # one sample set per seed; throughput: the median over them
    batch: int = 64  # the throughput's batch
    latency_repeats: int = 5  # batch-1 calls timed after a warm-up call (median)
    elf_ode: str = "1,2,4,8,16,32,64"  # Euler ODE steps ('' none; so for the lists below)
    elf_heun: str = "4,8,16"
    elf_sde: str = "32"  # the released SDE (uncond32: gamma 1.5, logit-normal grid)
    distill_steps: str = "1,2,4"
    mdlm_steps: str = "4,8,16,32,64,128"
    ar_temperatures: str = "0.7,0.85,1.0"  # with the KV cache
    ar_no_cache: str = "1.0"  # temperatures without the cache
    systems: str = "elf,distill,mdlm,ar"  # which to measure (those with a folder, or cost_only)
    cost_only: bool = False  # random weights of `shape` at each of `lengths`, no quality
    shape: str = "elf-b"  # cost_only: elf-b (the paper's) or test (tiny)
    lengths: str = "16,64,1024"  # cost_only: tokens a sample
    compile: str = "auto"  # torch.compile ELF and MDLM: auto (on CUDA), on, off
    compile_backend: str = "inductor"  # aot_eager: the tests' quick CPU compile
    compile_ar: bool = False  # the AR too (its cache grows every step: recompiles)
    device: str = "auto"  # auto, cpu, cuda
    threads: int = 0  # torch threads (0: torch's default)
    overwrite: bool = False  # OUT/measure.json of other settings: replace it


# ----------------------------------------------------------------------------------------
# memory and time


def status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{key}:\s+(\d+)", f.read(), re.M).group(1))


class Peak:
    """Peak memory (MB) over a block above what was held at its start: CUDA's allocator, or the
    process's RSS, its high-water mark reset through /proc/self/clear_refs."""

    def __init__(self, device: str):
        self.cuda, self.mb = device.startswith("cuda"), None

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
        else:
            with open("/proc/self/clear_refs", "w") as f:  # VmHWM := VmRSS (Linux >= 4.0)
                f.write("5")
            self.start = status_kb("VmRSS") * 1024
        return self

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
        else:
            peak = status_kb("VmHWM") * 1024
        self.mb = (peak - self.start) / 2**20


def weights_mb(*modules) -> float:
    return sum(t.numel() * t.element_size() for m in modules for t in m.state_dict().values()) / (
        2**20
    )


class Calls:
    """Counts a module's forward calls (the AR's NFE: one call a token, all rows at once)."""

    def __init__(self, module):
        self.n = 0
        module.register_forward_hook(lambda *a: setattr(self, "n", self.n + 1))


def measure(cfg: CostConfig, device: str, draw, scorer=None) -> dict:
    """One setting: draw(n, seed, batch) -> [{text, nfe}]. Latency: batch-1 calls, each a new
    sample, after a warm-up call; throughput: one call of n per seed at `batch`, the median
    (compiled: after a warm-up call at `batch` too, whose seconds join first_s)."""
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda"))
    seeds = comma_list("seeds", cfg.seeds)

    def timed(n, seed, batch):
        sync(device)
        t0 = time.perf_counter()
        with amp:
            res = draw(n, seed, batch)
        sync(device)
        return time.perf_counter() - t0, res

    first, _ = timed(1, 10_000, 1)  # the warm-up (and, compiled, the compile)
    if compiled(cfg, device):  # a compiled network compiles again for the batch's shape
        first += timed(cfg.batch, 10_000, cfg.batch)[0]
    with Peak(device) as p1:
        lat = [timed(1, 10_001 + r, 1)[0] for r in range(cfg.latency_repeats)]
    with Peak(device) as p64:
        runs = {s: timed(cfg.n, s, cfg.batch) for s in seeds}
    sets = {s: [r["text"] for r in res] for s, (_, res) in runs.items()}
    per_call = statistics.median(t for t, _ in runs.values())
    nfe = [r["nfe"] for _, res in runs.values() for r in res if r.get("nfe") is not None]
    row = {
        "latency_s": statistics.median(lat),
        "latency_all_s": lat,
        "first_s": first,
        "throughput": cfg.n / per_call,
        "batch_s": [t for t, _ in runs.values()],
        "peak_b1_mb": p1.mb,
        "peak_b64_mb": p64.mb,
        "nfe": sum(nfe) / len(nfe) if nfe else None,
        "examples": sets[seeds[0]][:3],
    }
    if scorer:
        q = with_ratios(scorer(sets), scorer.real)
        row["quality"] = {k: q[k] for k in KEEP if k in q}
        row["quality"].update({k: q[k] for k in ("kn_ppl_ratio", "ppl_ratio") if k in q})
    return row


# ----------------------------------------------------------------------------------------
# the systems: each yields (system, setting, steps, weights MB, draw)


def elf_settings(cfg, model, encoder, flow, preset, sc_cfg, length, student=None):
    """ELF's rows (ODE and Heun on the run's preset's grid, the released SDE) and the student's."""
    mk = lambda m, p, **kw: (
        lambda n, seed, b: generate(
            m, encoder, n=n, length=length, seed=seed, flow=flow, batch_size=b, preset=p, **kw
        )
    )
    lists = lambda key: comma_list(key, getattr(cfg, key)) if getattr(cfg, key) else []
    for sampler, key in (("ode", "elf_ode"), ("heun", "elf_heun")):
        for k in lists(key):
            kw = dict(sampler=sampler, steps=k, gamma=0.0, sc_cfg=sc_cfg)
            yield "ELF", f"{sampler} {k}", k, weights_mb(model), mk(model, preset, **kw)
    for k in lists("elf_sde"):
        yield "ELF", f"sde {k}", k, weights_mb(model), mk(model, "uncond32", steps=k, sc_cfg=sc_cfg)
    if student is not None:
        for k in lists("distill_steps"):
            p = f"fewstep{k}" if f"fewstep{k}" in PRESETS else "fewstep8"
            kw = dict(steps=k, sc_cfg=sc_cfg if sc_cfg == 1.0 else PRESETS[p]["sc_cfg"])
            yield "ELF distilled", f"fewstep {k}", k, weights_mb(student), mk(student, p, **kw)


def mdlm_settings(cfg, model, tokenizer, length, first):
    for k in comma_list("mdlm_steps", cfg.mdlm_steps) if cfg.mdlm_steps else []:
        draw = lambda n, seed, b, k=k: mdlm_model.generate(
            model, tokenizer, n, length, k, seed, "prob", first, b
        )
        yield "MDLM", f"mdlm {k}", k, weights_mb(model), draw


def ar_settings(cfg, model, tok, new_tokens, vocab_ids):
    calls = Calls(model)

    def mk(temperature, cache):
        def draw(n, seed, b):
            calls.n, texts = 0, []
            for start in range(0, n, b):  # one call a batch: its calls are its tokens
                texts += ar.sample(
                    model, tok, min(b, n - start), new_tokens, seed + start, b, vocab_ids, cache,
                    temperature,
                )  # fmt: skip
            return [{"text": t, "nfe": calls.n / -(-n // b)} for t in texts]

        return draw

    temps = lambda key: comma_list(key, getattr(cfg, key), float) if getattr(cfg, key) else []
    for t in temps("ar_temperatures"):
        yield "AR", f"cache T={t:g}", new_tokens, weights_mb(model), mk(t, True)
    for t in temps("ar_no_cache"):
        yield "AR", f"no cache T={t:g}", new_tokens, weights_mb(model), mk(t, False)


class StandIn:
    """Tokenizer and encoder of random weights: EOS is id 0, and decoding costs nothing."""

    pad_id = eos_id = eos_token_id = 0

    def __init__(self, dim: int):
        self.dim, self.tokenizer = dim, self

    def decode(self, row, skip_special_tokens=True):
        return ""

    def detokenize(self, row):
        return ""


def compiled(cfg, device):
    on = cfg.compile == "on" or (cfg.compile == "auto" and device.startswith("cuda"))
    return (lambda f, **kw: torch.compile(f, backend=cfg.compile_backend, **kw)) if on else None


def random_systems(cfg, device, length, wanted):
    """--cost_only: random weights of cfg.shape at `length` tokens, seed 0."""
    from transformers import GPT2Config, GPT2LMHeadModel

    s, comp = SHAPES[cfg.shape], compiled(cfg, device)
    H, depth, heads = s["trunk"]
    torch.manual_seed(0)
    if "elf" in wanted:
        elf = ELF(ELFConfig(latent_dim=s["D"], vocab_size=s["V"], max_seq_len=length, **s["elf"]))
        torch.nn.init.normal_(elf.final_layer.linear.weight, std=0.02)  # an x_hat that is not 0
        elf = elf.to(device).eval()
        net = comp(elf) if comp else elf
        yield from elf_settings(cfg, net, StandIn(s["D"]), FlowConfig(), "ode32", 3.0, length)
    if "mdlm" in wanted:
        model = mdlm_model.MDLM(
            mdlm_model.MDLMModelConfig(
                vocab_size=s["V"],
                mask_id=s["V"] - 1,
                hidden=H,
                depth=depth,
                heads=heads,
                max_seq_len=length,
            )  # fmt: skip
        )
        model = model.to(device).eval()
        if comp:  # its rows change every step (only those that changed are called)
            model.trunk = comp(model.trunk, dynamic=True)
        yield from mdlm_settings(cfg, model, StandIn(s["D"]), length, None)
    if "ar" in wanted:
        gpt = GPT2Config(
            vocab_size=s["V"], n_positions=length, n_embd=H, n_layer=depth, n_head=heads,
            bos_token_id=0, eos_token_id=0,
        )  # fmt: skip
        model = GPT2LMHeadModel(gpt).to(device).eval()
        if comp and cfg.compile_ar:
            model.forward = comp(model.forward, dynamic=True)
        yield from ar_settings(cfg, model, StandIn(s["D"]), length - 1, None)


def trained_systems(cfg, device, model, encoder, meta, wanted):
    """The checkpoint folders' systems, one at a time (each loaded when its rows come)."""
    comp, length = compiled(cfg, device), cfg.length
    flow, tcfg = FlowConfig(**meta["flow"]), meta["train"]
    preset = tcfg.get("sample_preset") or "uncond32"
    # a run trained without self-conditioning: SC-CFG 1 (a guidance by x_sc has nothing to read)
    sc_cfg = 1.0 if flow.self_cond_prob == 0 else PRESETS[preset]["sc_cfg"]
    student = None
    if cfg.distill and "distill" in wanted:
        rounds = sorted(
            (d for d in os.listdir(cfg.distill) if re.fullmatch(r"round\d+", d)),
            key=lambda d: int(d[5:]),
        )
        if not rounds:
            raise FileNotFoundError(f"no distillation rounds (round1, ...) in {cfg.distill}")
        student = checkpoint.load(os.path.join(cfg.distill, rounds[-1]), device)[0]
    if "elf" not in wanted:
        cfg = CostConfig(**{**asdict(cfg), "elf_ode": "", "elf_heun": "", "elf_sde": ""})
    net = comp(model) if comp else model
    stud = comp(student) if comp and student is not None else student
    yield from elf_settings(cfg, net, encoder, flow, preset, sc_cfg, length, stud)
    if cfg.mdlm and "mdlm" in wanted:
        m, mmeta = mdlm.load(cfg.mdlm, device)
        check_length("mdlm", mmeta["train"]["max_length"], length)
        if comp:
            m.trunk = comp(m.trunk, dynamic=True)
        tokenizer = Tokenizer(mmeta["train"]["encoder"])
        yield from mdlm_settings(cfg, m, tokenizer, length, mmeta["hold_first"])
    if cfg.ar and "ar" in wanted:
        from transformers import AutoTokenizer, GPT2LMHeadModel

        model = GPT2LMHeadModel.from_pretrained(cfg.ar).to(device).eval()
        tok = AutoTokenizer.from_pretrained(cfg.ar)
        ids = getattr(model.config, "vocab_ids", None)
        if comp and cfg.compile_ar:
            model.forward = comp(model.forward, dynamic=True)
        ids = None if ids is None else torch.tensor(ids)
        yield from ar_settings(cfg, model, tok, length - 1, ids)


def check_length(name, theirs, length):
    if theirs != length:
        raise ValueError(f"--{name}'s rows are {theirs} tokens, not --length {length}")


# ----------------------------------------------------------------------------------------
# the quality's reference: evaluate.py's yardstick


def make_scorer(cfg, device, model, encoder, meta):
    """sets {seed: texts} -> their figures beside real text's (the .real attribute)."""
    seeds = comma_list("seeds", cfg.seeds)
    real, shuffled, train_docs, held = reference(meta, encoder, cfg.n, seeds, cfg.split)
    gram = novelty_gram(encoder, real[seeds[0]])
    size = min(min(len(t) for t in real.values()), cfg.n)  # diversity at one set size
    lm = fit_cached(train_docs, encoder.vocab_size, encoder.eos_id, data_config(meta).cache_dir)
    fenc = evaluate.mauve_encoder(encoder, device)
    inst = Instrument(size, lm, lambda texts: features(fenc, texts), held, real)
    judge, tok = load_judge(cfg.judge, device) if cfg.judge else (None, None)
    score = lambda sets: score_sets(sets, judge, tok, encoder, train_docs, gram, instrument=inst)
    score.real, score.shuffled = score(real), score(shuffled)
    score.info = {"matched_size": size, "second_judge": lm.name, "held_out": len(held)}
    score.info["novelty_gram"] = gram  # seen n-grams: n
    return score


# ----------------------------------------------------------------------------------------
# the run


def context(cfg: CostConfig, device: str) -> dict:
    """What makes two runs' rows comparable: kept with measure.json, compared on a rerun."""
    keys = ["n", "seeds", "batch", "latency_repeats", "compile", "compile_ar", "cost_only"]
    keys += ["shape"] if cfg.cost_only else ["length", "split", "judge"]
    ctx = {k: getattr(cfg, k) for k in keys}
    for key in ("elf", "mdlm", "ar") if not cfg.cost_only else ():
        if getattr(cfg, key):
            folder = getattr(cfg, key)
            ctx[f"{key}_sha256"] = (
                checkpoint.provenance(folder).get("ckpt_sha256")
                if key != "ar"
                else sha256(os.path.join(folder, "model.safetensors"))
            )
    return {**ctx, "device": torch.device(device).type, "threads": torch.get_num_threads()}


def main(argv):
    cfg = parse(argv, CostConfig, "results/cost/measure.py")
    wanted = comma_list("systems", cfg.systems, str, allowed=SYSTEMS)
    for key in ("n", "batch", "latency_repeats"):
        if getattr(cfg, key) < 1:
            raise ValueError(f"{key} must be >= 1, got {getattr(cfg, key)}")
    if cfg.shape not in SHAPES or cfg.compile not in ("auto", "on", "off"):
        raise ValueError(f"shape: {', '.join(SHAPES)}; compile: auto, on, off")
    if not cfg.cost_only and not cfg.elf:
        raise ValueError("give --elf (its data is the quality's reference), or --cost_only")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    path = os.path.join(cfg.out, "measure.json")
    ctx = context(cfg, device)
    done = {}
    if os.path.isfile(path):
        with open(path) as f:
            old = json.load(f)
        if old["context"] != ctx and not cfg.overwrite:
            raise ValueError(f"{path} holds a run of other settings: --overwrite replaces it")
        if old["context"] == ctx:  # a rerun: the rows measured already are kept
            done = {(r["length"], r["system"], r["setting"]): r for r in old["rows"]}
    out = {"context": ctx, "machine": machine(), "torch": torch.__version__, "rows": []}
    out.update(checkpoint.provenance())
    os.makedirs(cfg.out, exist_ok=True)
    if cfg.cost_only:
        plans = [
            (L, random_systems(cfg, device, L, wanted), None)
            for L in comma_list("lengths", cfg.lengths)
        ]
    else:
        model, encoder, meta = load_sampler(cfg.elf, device)
        check_length("elf", meta["train"]["max_length"], cfg.length)
        scorer = make_scorer(cfg, device, model, encoder, meta)
        out["reference"] = {"real": scorer.real, "shuffled": scorer.shuffled, **scorer.info}
        plans = [(cfg.length, trained_systems(cfg, device, model, encoder, meta, wanted), scorer)]
    for length, rows, scorer in plans:
        for system, setting, steps, wmb, draw in rows:
            key = (length, system, setting)
            if key not in done:
                done[key] = {
                    "length": length,
                    "system": system,
                    "setting": setting,
                    "steps": steps,
                    "weights_mb": wmb,
                    **measure(cfg, device, draw, scorer),
                }
            r = done[key]
            out["rows"].append(r)
            q, scores = r.get("quality"), ""
            if q:
                scores = f"  n-gram PPL {q['kn_ppl_ratio']:.2f}x  MAUVE {q['mauve']['mean']:.3f}"
            print(
                f"L {length} {system:>13} {setting:<14} NFE {r['nfe'] or 0:6.1f}  "
                f"{r['latency_s']:8.4f} s/sample at batch 1  {r['throughput']:9.2f} samples/s "
                f"at batch {cfg.batch}  peak +{r['peak_b64_mb']:.0f} MB{scores}",
                flush=True,
            )
            atomic_write_text(path, json.dumps(out, indent=1) + "\n")  # kept as it goes
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    cli(main)
