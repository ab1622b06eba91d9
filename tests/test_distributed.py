"""Scaling paths of train.py: DDP through torchrun (Gloo on the CPU), torch.compile, bf16
autocast with float32 heads, gradient checkpointing, and checkpoints free of wrapper prefixes.

Run as a script it is the per-rank worker of the DDP test: it trains with train.main and
saves each rank's final weights (rank{r}.safetensors); rank 0 writes metrics.jsonl:
    torchrun --standalone --nproc_per_node=2 tests/test_distributed.py OUT configs/tiny.py ...
"""

import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY = [
    "configs/tiny.py",
    "--model=tiny",
    "--max_length=16",
    "--max_seq_len=16",
    "--eval_batches=1",
    "--n_samples=0",
    "--warmup_steps=2",
    "--ema_decay=0.9",
    "--encoder=minilm",
    "--latent_cache=false",
    "--eval_interval=100",
    "--log_interval=1",
]


def run_worker(out, args, nproc=None):
    """train.main in a fresh process (under torchrun when nproc is given); returns its outputs."""
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
        if nproc
        else [sys.executable]
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    r = subprocess.run(
        [*launcher, "tests/test_distributed.py", str(out), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    return r


def load_rank(out, rank):
    from safetensors.torch import load_file

    return load_file(str(out / f"rank{rank}.safetensors"))


def losses(out):
    """{step: train loss} of metrics.jsonl (rank 0 writes it; under DDP, the mean over ranks)."""
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in recs if "loss" in r}


@pytest.mark.slow
def test_two_ranks_agree_and_match_one_process(tmp_path, jsonl_file):
    """2 ranks x 4 rows (Gloo, Muon sharded across ranks) vs 1 process x 2 accumulation steps
    x 4 rows: the same global batch of 8, the same noise, so the same training; a one-process
    torchrun (DDP and Muon's all-gather over one rank) trains as the plain process, bit for bit."""
    args = [*TINY, f"--dataset={jsonl_file}", "--batch_size=8", "--max_steps=3", "--optimizer=muon"]
    ddp, one = tmp_path / "ddp", tmp_path / "one"
    r = run_worker(ddp, [*args, f"--out_dir={ddp}"], nproc=2)
    assert r.stdout.count("val denoise mse:") == 1  # rank 0 alone reports
    run_worker(one, [*args, f"--out_dir={one}", "--grad_accum=2"])
    solo = tmp_path / "solo"  # one-process torchrun: DDP of one rank
    r1 = run_worker(solo, [*args, f"--out_dir={solo}", "--grad_accum=2"], nproc=1)
    assert (
        "devices: 1 x cpu (DDP, gloo)" in r1.stdout and "devices: 2 x cpu (DDP, gloo)" in r.stdout
    )
    w0, w1, w = load_rank(ddp, 0), load_rank(ddp, 1), load_rank(one, 0)
    ws = load_rank(solo, 0)
    assert all(torch.equal(ws[k], w[k]) for k in w) and losses(solo) == losses(one)  # bit for bit
    for k in w0:
        assert torch.equal(w0[k], w1[k]), k  # ranks identical, bit for bit
        assert torch.allclose(w0[k], w[k], rtol=1e-4, atol=1e-5), (k, (w0[k] - w[k]).abs().max())
    l0, l = losses(ddp), losses(one)
    assert sorted(l0) == [1, 2, 3]
    for s in l0:  # losses averaged over ranks
        assert l0[s] == pytest.approx(l[s], rel=1e-4)
    assert "rank 1: peak resident memory" in r.stdout
    from lib import checkpoint

    model, meta = checkpoint.load(str(ddp), which="model")  # saved by rank 0, no "module." prefix
    assert meta["step"] == 3 and all(torch.equal(v, w0[k]) for k, v in model.state_dict().items())


def test_every_parameter_gets_a_gradient_without_decode_rows():
    """DDP (without find_unused_parameters) needs a gradient for every parameter every step:
    the decoder head stays in the graph when a batch has no decode row."""
    from flow import FlowConfig, elf_loss
    from model import ELF, ELFConfig

    model = ELF(
        ELFConfig(
            latent_dim=16, vocab_size=40, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=8
        )
    )
    x, tokens = torch.randn(3, 8, 16), torch.randint(0, 40, (3, 8))
    loss, m = elf_loss(
        model, x, tokens, torch.ones(3, 8, dtype=torch.bool), FlowConfig(decoder_prob=0.0)
    )
    loss.backward()
    assert m["n_ce"] == 0
    assert [n for n, p in model.named_parameters() if p.grad is None] == []


def micro_model(seed=0):
    from model import ELF, ELFConfig

    torch.manual_seed(seed)
    model = ELF(
        ELFConfig(
            latent_dim=16, vocab_size=40, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=8
        )
    )
    # x_hat != 0: the loss depends on the net
    torch.nn.init.normal_(model.final_layer.linear.weight, std=0.1)
    return model


def steps_of(net, model, seeds, B=6):
    """[(loss, flat gradient)] of elf_loss through `net` for each seed's branch draws."""
    from flow import FlowConfig, elf_loss

    g = torch.Generator().manual_seed(1)
    x, tokens = torch.randn(B, 8, 16, generator=g), torch.randint(0, 40, (B, 8), generator=g)
    out = []
    for seed in seeds:
        model.zero_grad(set_to_none=True)
        loss, m = elf_loss(
            net,
            x,
            tokens,
            torch.ones(B, 8, dtype=torch.bool),
            FlowConfig(),
            torch.Generator().manual_seed(seed),
        )
        loss.backward()
        out.append(
            (
                loss.detach(),
                torch.cat([p.grad.flatten() for p in model.parameters()]),
                int(m["n_ce"]) // 8,
            )
        )
    return out


def test_compiled_loss_builds_one_graph_per_grad_mode_for_every_row_count():
    """The self-conditioning and decode row counts change every step: flow.mark_varying_rows
    lets torch.compile build one no-grad and one grad graph for all of them (0 and 1 decode
    rows included) instead of a static graph and then a dynamic one, with the eager numbers
    bit for bit. (aot_eager: dynamo and AOTAutograd without Inductor's slow CPU codegen.)"""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = micro_model()
    sizes = []
    net = torch.compile(model, backend="aot_eager")
    recorded = lambda z, t, w, **k: (
        sizes.append(z.shape[0] if k.get("decode_idx") is None else None) or net(z, t, w, **k)
    )
    seeds = range(8)
    compiled, eager = steps_of(recorded, model, seeds), steps_of(model, model, seeds)
    assert {r for _, _, r in compiled} >= {0, 1, 2}  # decode rows: 0, 1 and more
    assert len({s for s in sizes if s}) >= 2  # self-conditioning rows vary
    for (lc, gc, _), (le, ge, _) in zip(compiled, eager):
        assert torch.equal(lc, le) and torch.equal(gc, ge)
    assert sum(counters["graph_break"].values()) == 0
    # backed dynamic shapes specialise a single self-conditioning row: then one graph more
    assert counters["stats"]["unique_graphs"] == 2 + (1 in sizes)


def test_a_one_process_torchrun_starts_the_process_group(monkeypatch):
    """torchrun sets LOCAL_RANK even for one process: then a Gloo (NCCL on CUDA) group starts,
    so that one device runs DDP and Muon's all-gather; plain python starts none."""
    import socket

    import torch.distributed as dist

    from lib import dist as dist_mod

    assert dist_mod.setup_distributed("cpu") == (0, 1, "cpu") and not dist.is_initialized()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for k, v in dict(
        LOCAL_RANK="0", RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    ).items():
        monkeypatch.setenv(k, v)
    try:
        assert dist_mod.setup_distributed("auto") == (0, 1, "cpu")
        assert dist_mod.ddp() and dist.get_backend() == "gloo" and dist.get_world_size() == 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_ddp_comes_before_compile_and_trains_as_eager(one_rank_group, monkeypatch):
    """train.wrap: DDP first, then torch.compile, so that dynamo's DDPOptimizer can split the
    graph at DDP's buckets and overlap their all-reduce with the backward; the steps give the
    eager losses and gradients bit for bit, and no_sync (gradient accumulation) reaches DDP."""
    import copy

    from torch.nn.parallel import DistributedDataParallel as DDP

    import train

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, **k: real(m, backend="aot_eager"))
    model = micro_model()
    ref = copy.deepcopy(model)
    net = train.wrap(model, compile=True, cuda=False)
    assert isinstance(net._orig_mod, DDP) and net._orig_mod.module is model
    with net.no_sync():
        pass
    for (lc, gc, _), (le, ge, _) in zip(
        steps_of(net, model, range(3)), steps_of(ref, ref, range(3))
    ):
        assert torch.equal(lc, le) and torch.equal(gc, ge)
    assert train.wrap(model, compile=False, cuda=False).module is model


def test_heads_stay_float32_under_bf16_autocast_and_checkpointing_keeps_gradients():
    from model import ELF, ELFConfig

    torch.manual_seed(0)
    model = ELF(
        ELFConfig(
            latent_dim=16, vocab_size=40, hidden=32, depth=2, heads=2, bottleneck=8, max_seq_len=8
        )
    )
    torch.nn.init.normal_(model.final_layer.linear.weight, std=0.02)
    z, t, w = torch.randn(2, 8, 16), torch.rand(2), torch.ones(2)
    dtypes = {}
    for name in (
        "self_cond_proj",
        "text_proj",
        "t_embedder",
        "self_cond_cfg_embedder",
        "blocks.0.mlp",
    ):
        model.get_submodule(name).register_forward_hook(
            lambda m, a, out, name=name: dtypes.__setitem__(name, out.dtype)
        )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x_hat, logits = model(
            z, t, w, decode=torch.tensor([True, False]), decode_idx=torch.tensor([0])
        )
    assert x_hat.dtype == torch.float32 and logits.dtype == torch.float32
    # the input projections and the conditioning embeddings in float32 (as released), the blocks
    # in bf16
    assert dtypes == {
        "self_cond_proj": torch.float32,
        "text_proj": torch.float32,
        "t_embedder": torch.float32,
        "self_cond_cfg_embedder": torch.float32,
        "blocks.0.mlp": torch.bfloat16,
    }
    grads = []
    for ckpt in (False, True):
        model.zero_grad()
        model.grad_checkpointing = ckpt
        x_hat, logits = model(
            z, t, w, decode=torch.tensor([True, False]), decode_idx=torch.tensor([0])
        )
        (x_hat.pow(2).mean() + logits.logsumexp(-1).mean()).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))


@pytest.mark.slow
def test_compiled_training_matches_eager(tmp_path, jsonl_file):
    import train
    from lib import checkpoint

    args = [*TINY, f"--dataset={jsonl_file}", "--batch_size=4", "--max_steps=3", "--optimizer=muon"]
    eager = train.main([*args, f"--out_dir={tmp_path / 'e'}", "--compile=false"])
    train.main([*args, f"--out_dir={tmp_path / 'c'}", "--compile=true"])
    for s in range(1, 4):
        assert losses(tmp_path / "c")[s] == pytest.approx(losses(tmp_path / "e")[s], rel=1e-3)
    model, _ = checkpoint.load(str(tmp_path / "c"), which="model")  # no "_orig_mod." prefix
    for k, v in model.state_dict().items():
        assert torch.allclose(v, eager.state_dict()[k], atol=1e-4), k


if __name__ == "__main__":  # the torchrun worker
    sys.path.insert(0, ROOT)
    from safetensors.torch import save_file

    import train

    out, argv = sys.argv[1], sys.argv[2:]
    model = train.main(argv)
    rank = int(os.environ.get("RANK", "0"))  # read at run time, not import
    os.makedirs(out, exist_ok=True)
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()},
        os.path.join(out, f"rank{rank}.safetensors"),
    )


@pytest.mark.slow
def test_gpu_check_script_runs_in_its_reduced_cpu_mode(tmp_path):
    """tools/gpu_check.sh is meant for a GPU; its --cpu mode runs the same stages at tiny
    shapes so that it cannot rot between the rare runs on a GPU (~70 s of CPU time)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OUT=str(tmp_path))
    r = subprocess.run(
        ["bash", "tools/gpu_check.sh", "--cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert r.returncode == 0, (r.stdout[-4000:], r.stderr[-3000:])
    assert r.stdout.rstrip().endswith("== gpu_check: every stage passed")
    summary = (tmp_path / "summary.txt").read_text()
    lines = {
        line.split()[0]: line
        for line in summary.splitlines()
        if line and not line.startswith(("=", " "))
    }
    assert list(lines) == [
        "step",
        "numerics",
        "optim",
        "flops",
        "compile",
        "train",
        "resume",
        "sample",
        "grad_ckpt",
        "cost",
    ]
    assert all(line.split()[1] == "PASS" for line in lines.values()), summary
    assert "ELF ode 8" in lines["cost"] and "AR cache T=1" in lines["cost"]
    assert (
        "0 graph breaks" in lines["compile"] and "0 compiles after the warm-up" in lines["compile"]
    )
    assert "(DDP, gloo: True)" in lines["train"] and "bitwise equal" in lines["resume"]
    assert "1.0000 and 1.0000 x the analytic count" in lines["flops"]
    # what $OUT brings back
    assert sorted(os.listdir(tmp_path)) == [
        "gpu_check.log",
        "results.tsv",
        "resumed_metrics.jsonl",
        "run_metrics.jsonl",
        "summary.txt",
    ]
