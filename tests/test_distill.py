"""distill.py: the inversion target's math on teachers whose paths are known,
the objective's plumbing, the CLI, and one round end to end on a tiny teacher; the claim 9
table (results/distill_control) over several teachers."""

import json
import os
import subprocess
import sys

import pytest
import torch

import distill
from flow import FlowConfig
from lib import checkpoint
from lib.report import collect_table
from model import ELF, ELFConfig
from tests.conftest import ROOT, results_table

T_EPS = 0.05


class ConstantTeacher:
    """x_hat = c whatever the input: every Euler path from z_s is the straight line to c."""

    def __init__(self, c):
        self.c, self.calls = c, []

    def __call__(self, z, t, w, x_sc=None, decode=None, decode_idx=None):
        self.calls.append((t.clone(), w.clone(), None if x_sc is None else x_sc.clone()))
        return self.c[: z.shape[0]].expand_as(z).clone(), None


class GaussianTeacher:
    """The exact E[x | z_t] for x ~ N(mu, diag(sigma^2)): a smooth, curved flow in float64."""

    def __init__(self, mu, sigma, s=2.0):
        self.mu, self.var, self.s = mu, sigma**2, s

    def __call__(self, z, t, w, x_sc=None, decode=None, decode_idx=None):
        t = t.view(-1, 1, 1)
        gain = t * self.var / (t**2 * self.var + (1 - t) ** 2 * self.s**2)
        return self.mu + gain * (z - t * self.mu), None


def draw(B=6, L=3, D=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, L, D, generator=g, dtype=torch.float64), g


def target_of(teacher, z_s, t_s, span, k=4, seed=1):
    flow, g = FlowConfig(t_eps=T_EPS), torch.Generator().manual_seed(seed)
    t_t = t_s + span
    times = distill.substep_times(t_s, t_t, k, flow, g)
    w = torch.full_like(t_s, 2.5)
    z_end = distill.teacher_path(teacher, z_s, times, w, torch.zeros_like(z_s), flow)
    return distill.inversion_target(z_s, z_end, t_s, t_t, T_EPS), z_end, times


def test_substep_times_are_sorted_draws_inside_the_span():
    t_s = torch.tensor([0.0, 0.1, 0.5, 0.7], dtype=torch.float64)
    times = distill.substep_times(
        t_s, t_s + 0.25, 4, FlowConfig(), torch.Generator().manual_seed(0)
    )
    assert times.shape == (4, 5)
    assert torch.equal(times[:, 0], t_s) and torch.allclose(times[:, -1], t_s + 0.25)
    assert (times.diff(dim=1) > 0).all()  # strictly inside, sorted
    # K - 1 = 3 interior points per row, drawn per example: the rows' relative grids differ
    rel = (times - t_s[:, None]) / 0.25
    assert not torch.allclose(rel[0], rel[1])
    # K = 1: one step
    assert distill.substep_times(t_s, t_s + 0.25, 1, FlowConfig()).shape == (4, 2)


def test_straight_teacher_path_gives_the_teachers_prediction_as_target():
    z_s, g = draw()
    c = torch.randn(z_s.shape, generator=g, dtype=torch.float64)
    t_s = torch.tensor([0.0, 0.05, 0.2, 0.4, 0.6, 0.7], dtype=torch.float64)
    teacher = ConstantTeacher(c)
    x_target, z_end, times = target_of(teacher, z_s, t_s, 0.25)
    # the Euler sub-steps stay on the line from z_s to c, whatever their sizes ...
    frac = (0.25 / (1 - t_s)).view(-1, 1, 1)
    assert torch.allclose(z_end, z_s + frac * (c - z_s), atol=1e-12, rtol=0)
    # ... so the inverted target is the teacher's x_hat itself
    assert torch.allclose(x_target, c, atol=1e-12, rtol=0)
    # the teacher chained its own predictions: x_sc = 0 first, then the previous x_hat
    assert len(teacher.calls) == 4 and teacher.calls[0][2].abs().max() == 0
    assert all(torch.equal(call[2], c) for call in teacher.calls[1:])
    assert all(torch.equal(call[0], times[:, j]) for j, call in enumerate(teacher.calls))


def test_target_tends_to_teacher_prediction_as_span_shrinks():
    z_s, _ = draw(B=5)
    teacher = GaussianTeacher(
        torch.tensor([1.0, -0.5, 0.0, 2.0], dtype=torch.float64),
        torch.tensor([0.3, 1.0, 0.5, 0.1], dtype=torch.float64),
    )
    t_s = torch.tensor([0.02, 0.15, 0.3, 0.5, 0.8], dtype=torch.float64)
    x_hat = teacher(z_s, t_s, None)[0]
    err = {
        d: (target_of(teacher, z_s, t_s, d)[0] - x_hat).abs().max().item()
        for d in (0.1, 1e-2, 1e-3, 1e-4)
    }
    assert err[0.1] > 1e-2  # the path is curved: a real span moves the target,
    assert err[1e-4] < 1e-4  # but the target converges to x_hat as d -> 0,
    for a, b in ((0.1, 1e-2), (1e-2, 1e-3), (1e-3, 1e-4)):
        assert 5 < err[a] / err[b] < 20, err  # at first order in d


def test_distill_loss_equals_the_formula_by_hand():
    """The student's loss on a batch is the x-space MSE to z_s + (1 - t_s) / d (z_teacher - z_s),
    with z_teacher from K Euler steps of the teacher chained through self-conditioning, each
    random draw replayed in order; t_s <= 1 - d keeps 1 - t_s above t_eps (no clamp)."""
    torch.manual_seed(0)
    net = lambda seed: ELF(
        ELFConfig(
            latent_dim=4, vocab_size=7, hidden=16, depth=1, heads=2, bottleneck=4, max_seq_len=8
        )
    ).requires_grad_(False)
    teacher, student = net(0), net(1)
    with torch.no_grad():
        for p in list(teacher.parameters()) + list(student.parameters()):
            p.add_(0.2 * torch.randn_like(p))
    B, L, D, k, d = 5, 3, 4, 2, 0.25
    x, tokens = torch.randn(B, L, D), torch.randint(0, 7, (B, L))
    flow = FlowConfig(decoder_prob=0.0, self_cond_prob=0.0)
    loss, _ = distill.distill_loss(
        student,
        teacher,
        x,
        tokens,
        torch.ones(B, L, dtype=torch.bool),
        d,
        flow,
        k,
        torch.Generator().manual_seed(5),
    )
    g = torch.Generator().manual_seed(5)
    eps = torch.randn(x.shape, generator=g)
    torch.rand(B, generator=g)  # branch: all denoise
    t_s = torch.sigmoid(-1.5 + 0.8 * torch.randn(B, generator=g)) * (1 - d)
    a, b = 1.5, 6.0
    w = a * (b / a) ** torch.rand(B, generator=g) - 1  # SC-CFG scale
    # self-conditioning coin, decoder lam
    torch.rand(B, generator=g), torch.randn(B, L, 1, generator=g)
    inner = (
        torch.sigmoid(-1.5 + 0.8 * torch.randn(B * (k - 1), generator=g))
        .view(B, k - 1)
        .sort(1)
        .values
    )
    times = torch.cat([torch.zeros(B, 1), inner, torch.ones(B, 1)], 1) * d + t_s[:, None]
    z_s = t_s.view(-1, 1, 1) * x + (1 - t_s.view(-1, 1, 1)) * 2.0 * eps
    z, x_sc = z_s, torch.zeros_like(x)
    for j in range(k):  # the teacher's Euler steps
        t0, t1 = times[:, j].view(-1, 1, 1), times[:, j + 1].view(-1, 1, 1)
        x_hat = teacher(z, times[:, j], w, x_sc=x_sc)[0]
        z, x_sc = z + (t1 - t0) * (x_hat - z) / (1 - t0), x_hat
    x_target = z_s + (1 - t_s.view(-1, 1, 1)) / d * (z - z_s)
    want = (student(z_s, t_s, w)[0] - x_target).pow(2).mean()
    assert torch.allclose(loss, want, rtol=1e-5), (loss, want)
    # not the end point
    assert not torch.allclose(loss, (student(z_s, t_s, w)[0] - z).pow(2).mean(), rtol=1e-3)


class Recorder(torch.nn.Module):
    """Wraps a network and keeps each call's (t, sc_cfg, x_sc, decode)."""

    def __init__(self, net):
        super().__init__()
        self.net, self.calls = net, []

    def forward(self, z, t, sc_cfg, x_sc=None, decode=None, decode_idx=None):
        self.calls.append(
            dict(t=t.clone(), sc_cfg=sc_cfg.clone(), x_sc=x_sc, decode=decode, n=z.shape[0])
        )
        return self.net(z, t, sc_cfg, x_sc=x_sc, decode=decode, decode_idx=decode_idx)


def test_distill_loss_feeds_teacher_and_student_alike_and_trains_only_the_student():
    torch.manual_seed(0)
    cfg = ELFConfig(
        latent_dim=8, vocab_size=13, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=8
    )
    teacher, student = ELF(cfg), ELF(cfg)
    torch.nn.init.normal_(teacher.final_layer.linear.weight, std=0.2)  # a non-trivial teacher
    teacher.eval().requires_grad_(False)
    T, S = Recorder(teacher), Recorder(student)
    B, L = 64, 5
    x, tokens = torch.randn(B, L, 8), torch.randint(0, 13, (B, L))
    flow = FlowConfig(decoder_prob=0.25, self_cond_prob=0.5)
    loss, m = distill.distill_loss(
        S,
        T,
        x,
        tokens,
        torch.ones(B, L, dtype=torch.bool),
        0.25,
        flow,
        4,
        torch.Generator().manual_seed(3),
    )
    loss.backward()
    assert torch.isfinite(loss) and m["mse"] > 0 and m["ce"] > 0
    assert all(p.grad is None for p in teacher.parameters())
    assert student.final_layer.linear.weight.grad.abs().sum() > 0
    s = S.calls[0]
    decode = s["decode"]
    assert 0 < decode.sum() < B  # both branches present
    assert torch.all(s["t"][decode] == 1) and torch.all(s["t"][~decode] <= 0.75)
    # 1 self-conditioning pass + K steps
    sc_call, *path = T.calls
    assert len(path) == 4 and all(c["n"] == int((~decode).sum()) for c in path)
    assert torch.equal(path[0]["t"], s["t"][~decode])  # the teacher starts at t_s ...
    assert torch.equal(path[0]["sc_cfg"], s["sc_cfg"][~decode])  # with the student's SC-CFG scale
    assert torch.equal(path[0]["x_sc"], s["x_sc"][~decode])  # and self-conditioning input
    assert torch.all(s["x_sc"][decode] == 0)
    used = s["x_sc"].abs().sum((1, 2)) > 0  # rows with self-conditioning
    assert sc_call["n"] == int(used.sum()) and 0 < used.sum() < (~decode).sum()


def test_cli_accepts_both_argument_styles_and_rejects_bad_keys():
    a = distill.parse_config(
        ["configs/distill_tiny.py", "--teacher", "out/x", "--round", "3", "--curriculum"]
    )
    b = distill.parse_config(
        ["configs/distill_tiny.py", "--teacher=out/x", "--round=3", "--curriculum=true"]
    )
    assert a == b and a.teacher == "out/x" and a.round == 3 and a.curriculum
    assert [float(d) for d in distill.spans(a)] == [1 / 16, 1 / 8, 1 / 4, 1 / 2, 1]
    b = distill.parse_config(["configs/distill_elf_b.py", "--teacher=out/owt_elf_b"])
    assert (
        b.optimizer == "muon"
        and b.blr == 1e-3
        and b.batch_size == 512
        and b.warmup_steps * 10 == b.steps_per_round
    )
    with pytest.raises(ValueError, match="unknown config key 'bogus'"):
        distill.parse_config(["--teacher=x", "--bogus=1"])
    with pytest.raises(ValueError, match="needs --teacher"):
        distill.parse_config(["configs/distill_tiny.py"])
    with pytest.raises(ValueError, match="round 6 out of range"):
        distill.parse_config(["--teacher=x", "--round=6"])
    with pytest.raises(ValueError, match="every span must lie in"):
        distill.parse_config(["--teacher=x", "--spans=1/4,2"])
    r = subprocess.run(
        [sys.executable, "distill.py", "configs/distill_tiny.py", "--teacher", "/no/such/dir"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        r.returncode != 0
        and r.stderr.strip().splitlines()[-1] == "error: no checkpoint at /no/such/dir"
    )


@pytest.mark.slow
def test_one_round_at_span_quarter_beats_the_teachers_own_four_steps(tmp_path, jsonl_file):
    """End to end (~1-2 min): train a tiny teacher, distil one round at span 1/4, and compare
    4-step ODE end points with the teacher's 64-step end point from the same noise."""
    import sample
    import train
    from evaluate import ode_end

    teacher_dir, out = tmp_path / "teacher", tmp_path / "distill"
    # the release recipe (TrainConfig's defaults for configs/tiny.py's departures): this test
    # measured distillation on it; but the cut vocabulary (token_vocab=train), whose targets
    # distill.run_round maps like train.py's
    from lib.config import TrainConfig

    undone = (
        "p_mean",
        "p_std",
        "self_cond_prob",
        "n_prefix",
        "pos_embed",
        "decoder_init",
        "decoder_prob",
        "dec_lam_mean",
    )
    release = [f"--{k}={getattr(TrainConfig(), k)}" for k in undone]
    train.main(
        [
            "configs/tiny.py",
            *release,
            "--max_length=16",
            "--batch_size=16",
            "--blr=0.032",
            "--packing=true",
            "--warmup_steps=10",
            "--max_steps=80",
            "--ema_decay=0.99",
            "--eval_batches=1",
            "--eval_interval=1000",
            "--n_samples=0",
            f"--dataset={jsonl_file}",
            "--latent_cache=false",
            f"--out_dir={teacher_dir}",
        ]
    )
    distill.main(
        [
            "configs/distill_tiny.py",
            "--teacher",
            str(teacher_dir),
            "--round",
            "1",
            "--spans=1/4",
            f"--out_dir={out}",
            "--steps_per_round=40",
            "--batch_size=16",
            "--blr=0.0048",
            "--warmup_steps=4",
            "--ema_decay=0.95",
            "--ema_warmup=false",
            "--latent_cache=false",
        ]
    )

    meta = json.loads((out / "round1" / "config.json").read_text())
    assert (
        meta["distill"]["span"] == 0.25
        and meta["distill"]["sampling_steps"] == 4
        and meta["step"] == 40
    )
    assert not [p for p in os.listdir(out / "round1") if ".tmp" in p]
    teacher, tmeta = checkpoint.load(str(teacher_dir))
    student, _ = checkpoint.load(str(out / "round1"))
    assert meta["model"] == tmeta["model"] and meta["latent_stats"] == tmeta["latent_stats"]

    flow = FlowConfig(**tmeta["flow"])
    z = 2.0 * torch.randn(32, 16, 384, generator=torch.Generator().manual_seed(123))  # fresh noise
    ref = ode_end(teacher, z, 64, 2.5, flow)
    err_teacher = (ode_end(teacher, z, 4, 2.5, flow) - ref).pow(2).mean().sqrt().item()
    err_student = (ode_end(student, z, 4, 2.5, flow) - ref).pow(2).mean().sqrt().item()
    # the teacher's 4 steps are visibly off
    assert err_teacher > 0.1, err_teacher
    assert err_student < err_teacher, (err_student, err_teacher)  # measured 0.29 vs 0.34

    # the round's folder is a checkpoint sample.py takes with the few-step presets
    res = sample.main(
        ["--ckpt", str(out / "round1"), "--preset", "fewstep4", "--grid", "uniform", "--n", "2"]
    )
    assert len(res) == 2 and all(r["nfe"] == 5 for r in res)

    # the round is somebody's work now: the same round again is refused, and --overwrite replaces it
    again = [
        "configs/distill_tiny.py",
        "--teacher",
        str(teacher_dir),
        "--round",
        "1",
        "--spans=1/4",
        f"--out_dir={out}",
        "--steps_per_round=2",
        "--batch_size=16",
        "--latent_cache=false",
    ]
    with pytest.raises(
        ValueError, match="round1 already holds a checkpoint: --overwrite replaces it"
    ):
        distill.main(again)
    assert json.loads((out / "round1" / "config.json").read_text())["step"] == 40
    distill.main(again + ["--overwrite"])
    assert sorted(os.listdir(out / "round1")) == ["config.json", "latest", "step-00000002"]


# ----------------------------------------------------------------------------------------
# results/distill_control/table.py: claim 9's verdict over teachers


def fake_distill_report(folder, teacher_seed, student_ppl, judge="", split="dev", control=True):
    """An evaluate.py --distill report of one teacher at 1 step: the teacher's n-gram PPL 900,
    the control's 500 (none without control), the student's student_ppl (each the same at
    sampling seeds 0, 1, 2); real text's 100. With a judge, Gen. PPL the n-gram PPL / 2."""
    figs = lambda ppl: {
        "kn_ppl": ppl,
        "distinct_2_matched": 0.9,
        "mauve": 0.5,
        "length": 6.0,
        "copies": 0.0,
        **({"ppl": ppl / 2} if judge else {}),
    }
    row = lambda model, ppl: {
        "model": model,
        "steps": 1,
        "traj_err": 0.4,
        **{k: {"mean": v, "se": 0.0} for k, v in figs(ppl).items()},
        "per_seed": [dict(seed=s, **figs(ppl)) for s in (0, 1, 2)],
        "example": "a text",
    }
    rep = {
        "teacher_seed": teacher_seed,
        "n": 64,
        "seeds": "0,1,2",
        "split": split,
        "judge": judge,
        "provenance": {
            "commit": "abcdef0123",
            "cpu": "AMD EPYC",
            "cpu_flags": ["avx2"],
            "torch": "2.13.0+cpu",
            "date": "2026-12-07T10:00:00",
            "judge": judge,
            "second_judge": "kneser-ney-3:x",
        },
        "real": {k: {"mean": v} for k, v in figs(100.0).items()},
        "rows": [row("teacher", 900.0), row("round5", student_ppl)]
        + ([row("control/round5", 500.0)] if control else []),
    }
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "report.json"), "w") as f:
        json.dump(rep, f)


def test_the_claim_9_table_pairs_students_and_controls_by_teacher(tmp_path, monkeypatch):
    """Three teachers whose student - control differences are -1, -2, -3 (n-gram PPL over real
    text's) read -2.00 [-4.48, +0.48] (n=3) paired by teacher (t at 2 d.f. 4.303, s.e. 0.577);
    a teacher scored on another day joins the kept table, a teacher given again takes its new
    figures, Gen. PPL is read over the teachers the GPT-2 judge scored (n said); two reports of
    one teacher and a kept table scored on another split are refused, the kept table kept."""
    table = results_table("distill_control")
    monkeypatch.setattr(table, "HERE", str(tmp_path))
    for seed, student in ((2, 400.0), (3, 300.0)):
        fake_distill_report(tmp_path / f"s{seed}", seed, student, judge="judges/x")
    (tmp_path / "table.json").write_text(
        json.dumps(table.collect(*(str(tmp_path / s) for s in ("s2", "s3"))))
    )
    fake_distill_report(tmp_path / "s4", 4, 200.0)  # another day, no GPT-2 judge
    t = table.collect(str(tmp_path / "s4"))
    assert [x["teacher_seed"] for x in t["teachers"]] == [2, 3, 4]
    md = table.render(t)
    student = "| 1 | student | 0.400 ± 0.000 | 3.00x ± 0.58 | 0.500 ± 0.000 | 0.900 ± 0.000 |"
    gen_ppl = " 175.0 ± 25.0 (n=2) |"  # Gen. PPL 200 and 150 against the controls' 250
    paired = " -2.00 [-4.48, +0.48] (n=3) | -6.00 [-8.48, -3.52] (n=3) | +0.000"
    assert student + gen_ppl + paired in md and "| -75.0 [-392.6, +242.6] (n=2) |" in md
    assert md.endswith("| a text |\n") and "## Teacher seed 4" in md
    assert "Judges: n-gram kneser-ney-3:x, GPT-2 none." in md and "GPT-2 judges/x." in md
    (tmp_path / "table.json").write_text(json.dumps(t))
    fake_distill_report(tmp_path / "s4", 4, 100.0)  # seed 4 again: its new figures, once
    again = table.collect(str(tmp_path / "s4"))
    assert [x["teacher_seed"] for x in again["teachers"]] == [2, 3, 4]
    assert again["teachers"][2]["rows"][1]["kn_ppl"]["mean"] == 100.0
    with pytest.raises(ValueError, match="two reports of teacher seed 4"):
        table.collect(str(tmp_path / "s4"), str(tmp_path / "s4"))
    fake_distill_report(tmp_path / "s5", 5, 100.0, split="test")
    kept = (tmp_path / "table.json").read_bytes()
    with pytest.raises(ValueError, match="holds teachers scored otherwise .*split dev"):
        collect_table(str(tmp_path / "table.json"), table.collect, [str(tmp_path / "s5")])
    assert (tmp_path / "table.json").read_bytes() == kept  # refused: the kept table kept
    with pytest.raises(ValueError, match="s5 is scored otherwise than .*s4 .*split test"):
        table.collect(str(tmp_path / "s4"), str(tmp_path / "s5"))


def test_the_claim_9_table_pairs_only_the_teachers_that_hold_both(tmp_path, monkeypatch):
    """A teacher scored without --control: student - control is paired over the two teachers
    that have a control, -1.50 [-7.85, +4.85] (n=2), student - teacher over all three; one
    such teacher alone renders and plots with no control."""
    table = results_table("distill_control")
    monkeypatch.setattr(table, "HERE", str(tmp_path))
    fake_distill_report(tmp_path / "s2", 2, 400.0)
    fake_distill_report(tmp_path / "s3", 3, 300.0)
    fake_distill_report(tmp_path / "s7", 7, 200.0, control=False)
    md = table.render(table.collect(*(str(tmp_path / s) for s in ("s2", "s3", "s7"))))
    assert "| -1.50 [-7.85, +4.85] (n=2) | -6.00 [-8.48, -3.52] (n=3) |" in md
    alone = table.render(table.collect(str(tmp_path / "s7")))
    assert "| 1 | student | 0.400 | 2.00x | 0.500 | 0.900 | - | - | -7.00 (n=1) |" in alone
    assert "| 1 | control |" not in alone
