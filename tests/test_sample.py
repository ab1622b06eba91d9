"""sample.py: samplers against a closed-form flow, guidance identities, seeds, fixed text,
the released-checkpoint converter and the CLI."""

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict

import pytest
import torch

from flow import Denoiser, FlowConfig, noise_stream, randn_streams, sample_latents, time_grid
from lib import checkpoint
from lib.outputs import sha256
from model import ELF, ELFConfig
from sample import generate, place_text
from tests.conftest import ROOT

S = 2.0  # noise scale


class GaussianOracle:
    """The exact x-prediction E[x | z_t] for data x ~ N(mu, diag(sigma^2)) under
    z_t = t x + (1 - t) s eps: mu + t sigma^2 / (t^2 sigma^2 + (1 - t)^2 s^2) (z_t - t mu)."""

    def __init__(self, mu, sigma):
        self.mu, self.var = mu, sigma**2
        self.cfg = type("C", (), {"latent_dim": len(mu)})

    def __call__(self, z, t, w, x_sc=None, decode=None, decode_idx=None):
        t = t.view(-1, 1, 1)
        gain = t * self.var / (t**2 * self.var + (1 - t) ** 2 * S**2)
        return self.mu + gain * (z - t * self.mu), None


MU, SIGMA = torch.tensor([1.0, -0.5, 0.0, 2.0]), torch.tensor([0.3, 1.0, 0.5, 0.1])


def transport(
    sampler, steps, gamma=0.0, n=20000, grid="uniform", seed=0, t_eps=1e-4, churn="linear"
):
    """Sample the oracle flow. The release clamps 1 - t at t_eps = 0.05, which stops the
    last 5% of the path short (measured: means ~2% shy at 200 steps); the convergence tests
    use a tiny t_eps so that only the sampler's discretisation is measured."""
    g = torch.Generator().manual_seed(seed)
    z = S * torch.randn(n, 1, 4, generator=g)
    den = Denoiser(GaussianOracle(MU, SIGMA), flow=FlowConfig(noise_scale=S, t_eps=t_eps))
    out, _ = sample_latents(den, z, time_grid(steps, grid), sampler, gamma, g, churn=churn)
    return out[:, 0], den.nfe


def w2(x):
    """Squared 2-Wasserstein distance between the samples' moment-matched Gaussian and the
    data's."""
    return ((x.mean(0) - MU) ** 2 + (x.std(0) - SIGMA) ** 2).sum().item()


def test_euler_ode_with_many_steps_transports_noise_to_data():
    x, nfe = transport("ode", 200)
    assert nfe == 200
    assert torch.allclose(x.mean(0), MU, atol=0.03)
    assert torch.allclose(x.std(0), SIGMA, rtol=0.05, atol=0.01)
    # with the released clamp the end point is close but measurably short of the data
    x, _ = transport("ode", 200, t_eps=0.05)
    assert torch.allclose(x.mean(0), MU, atol=0.06) and not torch.allclose(x.mean(0), MU, atol=0.02)


def test_heun_at_8_steps_beats_euler_at_8_steps():
    euler, heun = w2(transport("ode", 8)[0]), w2(transport("heun", 8)[0])
    assert heun < 0.5 * euler, (heun, euler)
    assert transport("heun", 8)[1] == 15  # 2 per step, 1 on the last


def test_sde_sampler_lands_on_the_data_distribution():
    """With variance-matched churn the SDE converges to the data distribution."""
    x, _ = transport("sde", 1000, gamma=1.0, churn="marginal")
    assert torch.allclose(x.mean(0), MU, atol=0.03)
    assert torch.allclose(x.std(0), SIGMA, rtol=0.03)


def test_released_sde_keeps_the_mean_but_sharpens():
    """The released churn z_back = alpha z + (1 - alpha) s eps under-injects noise: the means
    land, but the spread collapses (measured std/sigma 0.13-0.31 at 1000 steps, gamma 1),
    and more steps do not cure it. The sharpening is the sampler's, not the network's."""
    x, _ = transport("sde", 1000, gamma=1.0, churn="linear")
    assert torch.allclose(x.mean(0), MU, atol=0.03)
    assert (x.std(0) < 0.5 * SIGMA).all()


def test_time_grids():
    for kind in ("uniform", "logit_normal", "logit_normal_quantile"):
        g = time_grid(16, kind, generator=torch.Generator().manual_seed(0))
        assert len(g) == 17 and g[0] == 0 and g[-1] == 1 and (g.diff() >= 0).all()
    q = time_grid(4, "logit_normal_quantile")
    # the median of sigmoid(N(-1.5, 0.8))
    assert torch.allclose(q[2], torch.sigmoid(torch.tensor(-1.5)))
    assert torch.equal(q, time_grid(4, "logit_normal_quantile"))
    a, b = (
        time_grid(8, "logit_normal", generator=torch.Generator().manual_seed(s)) for s in (0, 1)
    )
    assert not torch.equal(a, b)
    with pytest.raises(ValueError, match="unknown time grid"):
        time_grid(4, "cosine")


def tiny_elf(D=384, V=30522, seed=0):
    torch.manual_seed(seed)
    net = ELF(
        ELFConfig(
            latent_dim=D, vocab_size=V, hidden=32, depth=2, heads=2, bottleneck=8, max_seq_len=32
        )
    )
    torch.nn.init.normal_(net.final_layer.linear.weight, std=0.1)  # a non-trivial flow head
    return net.eval()


def test_sde_with_gamma_zero_is_the_ode_exactly():
    net = tiny_elf(D=8, V=11)
    z = torch.randn(3, 5, 8)
    grid = time_grid(6, "logit_normal_quantile")
    ode = sample_latents(Denoiser(net, 2.0), z, grid, "ode")[0]
    sde = sample_latents(
        Denoiser(net, 2.0), z, grid, "sde", gamma=0.0, generator=torch.Generator()
    )[0]
    assert torch.equal(ode, sde)
    churn = sample_latents(
        Denoiser(net, 2.0), z, grid, "sde", gamma=1.5, generator=torch.Generator()
    )[0]
    assert not torch.allclose(ode, churn)


def test_self_conditioning_state_and_sc_cfg_scale_reach_the_network():
    net = tiny_elf(D=8, V=11)
    seen = []
    real = net.forward
    net.forward = lambda z, t, w, x_sc=None, **k: (
        seen.append((w.clone(), x_sc.clone())) or real(z, t, w, x_sc, **k)
    )
    z = torch.randn(2, 4, 8)
    _, xs = sample_latents(Denoiser(net, 1.0), z, time_grid(3), "ode", trajectory=True)
    assert all(torch.equal(w, torch.ones(2)) for w, _ in seen)  # SC-CFG w = 1: the unguided scale
    assert torch.equal(seen[0][1], torch.zeros(2, 4, 8))  # no guess at the first step
    assert torch.equal(seen[1][1], xs[0]) and torch.equal(seen[2][1], xs[1])


def test_cfg_one_equals_the_conditional_path():
    net = tiny_elf(D=8, V=11)
    fixed = torch.zeros(2, 5, dtype=torch.bool)
    fixed[:, :2] = True
    x_fixed = torch.randn(2, 5, 8)
    z, grid = torch.randn(2, 5, 8), time_grid(4)
    one = Denoiser(net, 1.0, guidance=1.0, cond=fixed, x_cond=x_fixed)
    out1 = sample_latents(one, z, grid, "ode")[0]
    assert one.nfe == 4
    guided = Denoiser(net, 1.0, guidance=2.0, cond=fixed, x_cond=x_fixed)
    out2 = sample_latents(guided, z, grid, "ode")[0]
    assert guided.nfe == 8 and not torch.allclose(out1, out2)  # CFG doubles the passes
    # one step from t = 0 to 1 lands on the guided x_hat = x_u + w (x_c - x_u), by hand
    clamp = lambda a: torch.where(fixed[..., None], x_fixed, a)
    drop = lambda a: a.masked_fill(fixed[..., None], 0.0)
    with torch.no_grad():
        t, w, x_sc = torch.zeros(2), torch.ones(2), clamp(torch.zeros_like(z))
        x_c, x_u = net(clamp(z), t, w, x_sc=x_sc)[0], net(drop(clamp(z)), t, w, x_sc=drop(x_sc))[0]
    one_step = sample_latents(
        Denoiser(net, 1.0, guidance=3.0, cond=fixed, x_cond=x_fixed), z, time_grid(1), "ode"
    )[0]
    assert torch.allclose(one_step, clamp(x_u + 3.0 * (x_c - x_u)), atol=1e-5)
    # the order matters
    assert not torch.allclose(one_step, clamp(x_c + 3.0 * (x_u - x_c)), atol=1e-3)
    # the condition's latents never change
    assert torch.equal(out1[:, :2], x_fixed[:, :2]) and torch.equal(out2[:, :2], x_fixed[:, :2])


def test_fixed_seed_gives_identical_samples(minilm):
    net = tiny_elf()
    kw = dict(n=3, length=12, steps=4, sampler="sde", gamma=1.5, sc_cfg=2.0, grid="logit_normal")
    a, b = generate(net, minilm, seed=7, **kw), generate(net, minilm, seed=7, **kw)
    assert [r["text"] for r in a] == [r["text"] for r in b]
    assert all(r["nfe"] == 5 for r in a)  # 4 steps + 1 decode pass
    assert [r["text"] for r in generate(net, minilm, seed=8, **kw)] != [r["text"] for r in a]


def test_prefix_suffix_and_spans_come_back_verbatim(minilm):
    net = tiny_elf()
    res = generate(
        net,
        minilm,
        n=2,
        length=20,
        steps=3,
        sampler="ode",
        prefix="the city of paris",
        suffix="in france",
        spans=[(9, "famous river")],
        trajectory=True,
    )
    for r in res:
        assert r["text"].startswith("the city of paris")
        assert r["text"].endswith("in france") and "famous river" in r["text"]
        assert len(r["trajectory"]) == 3
    ids, fixed, x = place_text(minilm, 20, "the city of paris", "in france", [(9, "famous river")])
    assert fixed.sum() == len(minilm.tokenize(["the city of paris in france famous river"])[0])
    with pytest.raises(ValueError, match="does not fit"):
        place_text(minilm, 4, prefix="a much longer prefix than four tokens")
    with pytest.raises(ValueError, match="overlaps"):
        place_text(minilm, 20, prefix="one two three", spans=[(1, "x")])


def save_tiny(path, seed=0):
    net = tiny_elf(seed=seed)
    meta = {
        "train": {"encoder": "minilm", "encoder_dtype": "float32", "max_length": 16},
        "model": asdict(net.cfg),
        "flow": asdict(FlowConfig()),
        "latent_stats": {"mean": 0.0, "std": 0.3},
    }
    checkpoint.save(str(path), net, tiny_elf(seed=seed), None, 0, meta)
    return str(path)


@pytest.fixture
def ckpt_dir(tmp_path):
    return save_tiny(tmp_path / "ck")


def test_cli_writes_samples_once_and_the_settings_once(ckpt_dir, tmp_path):
    """A finished --out run: samples.jsonl holds each sample once ({text, nfe, seed, index}), in
    index order; run.json holds the settings and the provenance once (the weights' hash, no
    machine path); the chunks a restart would have kept are gone."""
    out = tmp_path / "s"
    r = subprocess.run(
        [
            sys.executable,
            "sample.py",
            "--ckpt",
            ckpt_dir,
            "--n",
            "3",
            "--preset",
            "uncond32",
            "--steps",
            "4",
            "--prefix",
            "the history of",
            "--seed",
            "5",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    recs = [json.loads(l) for l in (out / "samples.jsonl").read_text().splitlines()]
    assert [rec["index"] for rec in recs] == [0, 1, 2]
    for rec in recs:
        assert set(rec) == {"text", "nfe", "seed", "index"}
        assert rec["nfe"] == 5 and rec["seed"] == 5 and rec["text"].startswith("the history of")
    run = json.loads((out / "run.json").read_text())
    s = run["settings"]
    assert (
        s["seed"] == 5
        and s["steps"] == 4
        and s["sampler"] == "sde"
        and s["gamma"] == 1.5
        and s["sc_cfg"] == 3.0
    )
    assert run["provenance"]["ckpt_sha256"] == sha256(
        f"{checkpoint.find(ckpt_dir)}/model.safetensors"
    )
    assert "git_commit" in run["provenance"] and "/" not in json.dumps(run["provenance"])
    assert run["runs"][0]["drawn"] == 3 and run["runs"][0]["samples_per_s"] > 0
    assert not (out / "chunks").exists()
    r = subprocess.run(
        [sys.executable, "sample.py", "--ckpt", str(tmp_path / "none")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1].startswith(
        "error: no checkpoint at"
    )


def test_a_sample_depends_on_its_seed_and_index_alone(minilm):
    """Sample i's noise (start and churn) comes from its own stream (seed, i): a batch of rows
    integrates each row as it would alone, and a shard of indices gives those samples of the
    whole run. The time grid is one per seed (sample.generate)."""
    net = tiny_elf(D=8, V=11)
    streams = lambda idx: [noise_stream(3, i) for i in idx]
    grid = time_grid(5, "logit_normal", generator=noise_stream(3, "grid"))
    run = lambda idx: sample_latents(
        Denoiser(net, 2.0),
        2 * randn_streams((len(idx), 4, 8), streams(idx), "cpu"),
        grid,
        "sde",
        gamma=1.5,
        generator=streams(idx),
    )[0]
    batch = run([0, 1, 2])
    for i in range(3):
        assert torch.allclose(batch[i], run([i])[0], atol=1e-5)
    assert not torch.allclose(run([0])[0], run([1])[0])
    kw = dict(
        length=12,
        steps=4,
        sampler="sde",
        gamma=1.5,
        sc_cfg=2.0,
        grid="logit_normal",
        seed=3,
        batch_size=2,
    )
    whole, shard = (
        generate(tiny_elf(), minilm, n=6, **kw),
        generate(tiny_elf(), minilm, indices=[2, 3], **kw),
    )
    assert [(r["index"], r["text"]) for r in shard] == [(r["index"], r["text"]) for r in whole[2:4]]


def test_a_run_folder_of_another_run_is_refused_and_left_alone(ckpt_dir, tmp_path):
    import sample

    out = tmp_path / "run"
    base = ["--ckpt", ckpt_dir, "--n", "4", "--batch_size", "2", "--steps", "2", "--out", str(out)]
    first = sample.main(base)
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert (
        not (out / "chunks").exists() and len((out / "samples.jsonl").read_text().splitlines()) == 4
    )
    for extra, message in (
        (["--seed", "1"], "seed 0 there, 1 here"),
        (["--steps", "3"], "steps 2 there, 3 here"),
        (["--n", "6"], "n 4 there, 6 here"),
    ):
        with pytest.raises(ValueError, match=f"holds another run: {message}"):
            sample.main(base + extra)
    other = save_tiny(tmp_path / "other", seed=1)  # other weights, same settings
    with pytest.raises(ValueError, match="holds another run: other checkpoint weights"):
        sample.main([*base[:1], other, *base[2:]])
    # nothing overwritten
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    again = sample.main(base)  # the same run: nothing left to draw
    assert [r["text"] for r in again] == [r["text"] for r in first]
    assert json.loads((out / "run.json").read_text())["runs"][-1]["drawn"] == 0


def descendants(pid):
    """pid and every process below it (torchrun starts its workers in sessions of their own)."""
    children = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def alive(pid) -> bool:
    """Whether pid still runs (a zombie, killed but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds torchrun's workers through /proc")
def test_two_ranks_killed_at_a_random_chunk_and_restarted_equal_one_uninterrupted_process(
    ckpt_dir, tmp_path
):
    """1 process, uninterrupted, against 2 Gloo ranks under torchrun, SIGKILLed (the launcher
    and both workers) once a random number of chunks is on disk, then the same command again:
    the merged samples.jsonl are the same bytes."""
    args = [
        "sample.py",
        "--ckpt",
        ckpt_dir,
        "--n",
        "16",
        "--batch_size",
        "4",
        "--steps",
        "64",
        "--seed",
        "3",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    one, two = tmp_path / "one", tmp_path / "two"
    r = subprocess.run(
        [sys.executable, *args, "--out", str(one)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # '--': torchrun would read '--n' as its own --nnodes
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "--",
        *args,
        "--out",
        str(two),
    ]
    k = random.randint(1, 2)  # of 4 chunks
    p = subprocess.Popen(
        torchrun, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    finished = lambda: (
        len(list((two / "chunks").glob("*.jsonl"))) if (two / "chunks").is_dir() else 0
    )
    deadline = time.time() + 300
    while finished() < k and p.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    pids = descendants(p.pid)
    for pid in reversed(pids):  # the workers, then the launcher
        with contextlib.suppress(ProcessLookupError):  # one that ended meanwhile
            os.kill(pid, signal.SIGKILL)
    p.wait()
    # no rename may land after the count
    while any(alive(pid) for pid in pids) and time.time() < deadline:
        time.sleep(0.01)
    left = finished()
    assert 0 < left < 4 and not (two / "samples.jsonl").exists(), (k, left)
    r = subprocess.run(torchrun, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (
        f"drew {16 - 4 * left} on 2 rank(s)" in r.stdout
        and f"{4 * left} were already there" in r.stdout
    )
    assert (two / "samples.jsonl").read_bytes() == (one / "samples.jsonl").read_bytes(), (k, left)


def test_a_model_trained_without_self_conditioning_samples_without_it():
    seen = []
    net = lambda z, t, w, x_sc=None: seen.append(x_sc.clone()) or (z * 0.5, None)
    z = torch.randn(2, 3, 4)
    for p, nonzero in ((0.5, True), (0.0, False)):
        seen.clear()
        sample_latents(
            Denoiser(net, 1.0, flow=FlowConfig(self_cond_prob=p)), z, time_grid(3), "ode"
        )
        assert bool(seen[1].abs().sum() > 0) == nonzero  # step 2 sees step 1's guess, or zeros
