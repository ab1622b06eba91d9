"""decompose.py: each figure of the error decomposition on a case where its value is known
(a perfect decoder reads clean latents at accuracy 1; identical positions have cosine 1; a
denoiser that leaves z alone brings back lightly noised latents), and the evaluate.py and
ablate.py paths that report it."""

import json
import math
import subprocess
import sys
import types

import pytest
import torch

from conditional import Rows, batch_masks
from flow import FlowConfig
from lib import decompose
from tests.conftest import ROOT

V, D, L = 12, 64, 8
EOS, CLS = 1, 0
PRESET = dict(sampler="ode", steps=8, sc_cfg=1.0, gamma=0.0, grid="uniform", guidance=1.0)


class Table(torch.nn.Module):
    """A stand-in for ELF: token t's latent is row t of a fixed table of near-orthogonal
    vectors; decode mode reads the nearest row (a perfect decoder of clean latents); denoise
    mode returns x_hat = z, or the mean of z over positions (every position alike) when `blur`."""

    def __init__(self, blur=False):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(V, D, generator=g), requires_grad=False)
        self.blur = blur
        self.cfg = types.SimpleNamespace(latent_dim=D)

    def forward(self, z, t, sc_cfg, x_sc=None, decode=None, decode_idx=None):
        x_hat = z.mean(1, keepdim=True).expand_as(z) if self.blur else z
        logits = None if decode_idx is None else z[decode_idx] @ self.table.T
        return x_hat, logits

    def token_ids(self, rows):  # ELF's: logit rows are token ids (no cut vocabulary)
        return rows

    def vocab_index(self, tokens):
        return tokens

    def latents(self, x, index):  # ELF's: the encoder's latents, as given
        return x


class FakeLatents:
    """encoder.Latents' interface over fixed rows: latents are the table's rows of the tokens."""

    def __init__(self, model, ids, length):
        self.rows = Rows(ids, length, None, pad_in_loss=True)
        self.model = model

    def __len__(self):
        return len(self.rows)

    def batch(self, idx, device, drop=None):
        rows = self.rows.select(idx)
        x = self.model.table.data[rows.ids].to(device)
        return x, rows.ids.to(device), batch_masks(rows, device)


def make_rows(n, seed):
    """[CLS] w1 .. wk EOS EOS ... rows with distinct words (ids 2..V-1)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((n, L), EOS)
    length = torch.randint(6, L + 1, (n,), generator=g)  # 4-6 words: none repetitive
    for i in range(n):
        k = int(length[i])
        ids[i, 0] = CLS
        ids[i, 1 : k - 1] = torch.randperm(V - 2, generator=g)[: k - 2] + 2
    return ids, length


ENCODER = types.SimpleNamespace(
    eos_id=EOS,
    tokenizer=types.SimpleNamespace(
        all_special_ids=[CLS, EOS], convert_ids_to_tokens=lambda ids: [f"w{i}" for i in ids]
    ),
    detokenize=lambda ids: " ".join(f"w{i}" for i in ids.tolist() if i > 1),
)


def test_accuracy_and_masks():
    tokens = torch.tensor([[0, 2, 3, 1], [0, 4, 1, 1]])
    pred = torch.tensor([[0, 2, 9, 1], [0, 4, 1, 7]])
    text = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    assert decompose.accuracy(tokens, tokens, text) == 1.0
    assert decompose.accuracy(pred, tokens, text) == pytest.approx(6 / 7)
    # a text runs from its start to its first EOS, that EOS included
    m = decompose.text_mask(
        torch.tensor([[0, 2, 1, 5, 1], [0, 2, 3, 4, 5], [7, 1, 3, 1, 1]]), EOS, [0, 0, 2]
    )
    assert m.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 1, 0]]


def test_adjacent_cosine_known_cases():
    same = torch.randn(3, 1, 16).expand(3, 5, 16)
    assert decompose.adjacent_cosine(same) == pytest.approx(1.0)
    e = torch.eye(4)[None]  # orthogonal neighbours
    assert decompose.adjacent_cosine(e) == pytest.approx(0.0, abs=1e-7)
    assert decompose.adjacent_cosine(
        -same[:, :2] * torch.tensor([1.0, -1.0])[None, :, None]
    ) == pytest.approx(-1.0)
    assert math.isnan(decompose.adjacent_cosine(same, torch.zeros(3, 5, dtype=torch.bool)))


def test_nearest_recovers_the_keys():
    keys = torch.randn(50, 32)
    toks = torch.arange(50) * 3
    # scale does not matter
    found, cos = decompose.nearest(keys[[4, 9, 0]] * 2.5, keys, toks, chunk=2)
    assert found.tolist() == [12, 27, 0] and torch.allclose(cos, torch.ones(3))


def test_decompose_perfect_decoder_and_identity_flow(tmp_path):
    model = Table()
    train, val = FakeLatents(model, *make_rows(40, 0)), FakeLatents(model, *make_rows(16, 1))
    d = decompose.decompose(model, ENCODER, val, train, FlowConfig(noise_scale=1.0), PRESET, n=16)
    assert d["decoder"]["acc_text"] == 1.0 and d["decoder"]["acc_all"] == 1.0
    assert d["decoder"]["nn_acc_text"] == 1.0  # every word is in the training rows
    rt = {r["t0"]: r for r in d["round_trip"]}
    assert rt[0.9]["acc_text"] == 1.0 and rt[0.9]["repetition"] == d["real_repetition"] == 0.0
    assert rt[0.9]["steps"] == 1  # the uniform 8-step grid above 0.9: [0.9, 1]
    assert rt[0.5]["steps"] == 4
    assert d["adjacent_cosine"]["real_text"] < 0.5  # distinct words: near-orthogonal rows
    assert d["end_nn_cosine"]["real"] == pytest.approx(1.0, abs=1e-5)
    assert len(d["trajectory"]["rows"]) == 3 and len(d["trajectory"]["rows"][0]["steps"]) == 8
    decompose.plot_trajectory(d["trajectory"], str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").stat().st_size > 1000
    assert set(decompose.summary(d)) >= {
        "dec_acc",
        "nn_acc",
        "rt_acc_0.9",
        "rt_rep_0.5",
        "adj_cos_first",
    }
    assert any("decoder on clean latents | 1.000" in line for line in decompose.markdown(d))


def test_decoder_accuracy_split_by_tokens_training_shows():
    """A word that no training row holds counts as unseen: the perfect decoder reads it (accuracy
    1 on both parts), the nearest training latent cannot, and its share of the text is exact."""
    model = Table()
    train_ids, train_len = make_rows(40, 0)
    train_ids[train_ids == V - 1] = V - 2  # word V-1 never in training
    val_ids, val_len = make_rows(16, 1)
    train, val = FakeLatents(model, train_ids, train_len), FakeLatents(model, val_ids, val_len)
    d = decompose.decompose(model, ENCODER, val, train, FlowConfig(noise_scale=1.0), PRESET, n=16)[
        "decoder"
    ]
    text_tokens = int(val_len.sum())  # [CLS], words, the first EOS
    n_unseen = int((val_ids == V - 1).sum())
    assert n_unseen > 0 and d["unseen_text"] == pytest.approx(n_unseen / text_tokens)
    assert d["acc_text_seen"] == 1.0 and d["acc_text_unseen"] == 1.0
    assert d["nn_acc_text"] == pytest.approx(1 - n_unseen / text_tokens)
    assert decompose.seen_tokens(train, V).tolist() == [i != V - 1 for i in range(V)]
    assert decompose.seen_tokens(train, V, max_rows=1).sum() < V - 1  # one row shows a few words


def test_decompose_sees_blur():
    """A flow whose x_hat is the same at every position: neighbours' cosine 1 along the
    trajectory, and round trips that end in one repeated token."""
    model = Table(blur=True)
    train, val = FakeLatents(model, *make_rows(40, 0)), FakeLatents(model, *make_rows(16, 1))
    d = decompose.decompose(model, ENCODER, val, train, FlowConfig(noise_scale=1.0), PRESET, n=16)
    assert d["adjacent_cosine"]["first_step"] == pytest.approx(1.0, abs=1e-5)
    assert d["decoder"]["acc_text"] == 1.0  # the decoder is not to blame
    assert d["round_trip"][-1]["acc_text"] < 0.5


def test_evaluate_decompose_only(tmp_path):
    """`evaluate.py --decompose only` needs no judge and writes the decomposition and the
    picture."""
    import dataclasses

    from lib import checkpoint
    from lib.config import TrainConfig
    from model import ELF, ELFConfig

    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"text": f"the river {i} and the sea"}) + "\n" for i in range(40))
    )
    torch.manual_seed(0)
    cfg = ELFConfig(
        latent_dim=384, vocab_size=30522, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=12
    )
    train = dataclasses.asdict(
        TrainConfig(
            dataset=str(docs),
            encoder="minilm",
            max_length=12,
            packing=False,
            pad_token="eos",
            latent_mean=0.0,
            latent_std=0.3,
            cache_dir=str(tmp_path / "c"),
        )
    )
    meta = {
        "train": train,
        "model": dataclasses.asdict(cfg),
        "flow": dataclasses.asdict(FlowConfig()),
        "latent_stats": {"mean": 0.0, "std": 0.3},
    }
    checkpoint.save(str(tmp_path / "ck"), ELF(cfg), ELF(cfg), None, 0, meta)
    r = subprocess.run(
        [
            sys.executable,
            "evaluate.py",
            "--ckpt",
            str(tmp_path / "ck"),
            "--decompose",
            "only",
            "--decompose_n",
            "4",
            "--preset",
            "ode32",
            "--steps",
            "4",
            "--out_dir",
            str(tmp_path / "ev"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((tmp_path / "ev" / "report.json").read_text())
    d = report["decomposition"]
    assert (
        d["n"] == 4
        and 0 <= d["decoder"]["acc_text"] <= 1
        and len(d["adjacent_cosine"]["per_step"]) == 4
    )
    assert (tmp_path / "ev" / "trajectory.png").is_file()
    assert "Where the error comes from" in (tmp_path / "ev" / "report.md").read_text()
    bad = subprocess.run(
        [sys.executable, "evaluate.py", "--ckpt", str(tmp_path / "ck"), "--decompose", "maybe"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert bad.returncode != 0 and "unknown decompose 'maybe'" in bad.stderr


class Scaled(Table):
    """A stand-in whose x_hat grows with the SC-CFG scale: x_hat = z (1 + 0.1 (w - 1))."""

    def forward(self, z, t, sc_cfg, x_sc=None, decode=None, decode_idx=None):
        x_hat, logits = super().forward(z, t, sc_cfg, x_sc, decode, decode_idx)
        return x_hat * (1 + 0.1 * (sc_cfg[:, None, None] - 1)), logits


def test_sc_cfg_shift_is_zero_where_w_is_ignored_and_exact_where_it_scales():
    """The SC-CFG measurement: a network that ignores w moves nothing (shift 0, no token
    changed); one whose x_hat is (1 + 0.1 (w - 1)) z moves it by 0.2 at w = 3, every step."""
    for model, want in ((Table(), 0.0), (Scaled(), 0.2)):
        train, val = FakeLatents(model, *make_rows(40, 0)), FakeLatents(model, *make_rows(16, 1))
        d = decompose.decompose(
            model, ENCODER, val, train, FlowConfig(noise_scale=1.0), PRESET, n=16
        )
        sc = d["sc_cfg"]
        assert sc["w"] == decompose.SC_CFG_PROBE == 3.0 and len(sc["shift_per_step"]) == 8
        assert sc["shift_per_step"] == pytest.approx([want] * 8, abs=1e-5)
        assert 0 <= sc["tokens_changed"] <= 1 and (want or sc["tokens_changed"] == 0)
        assert decompose.summary(d)["sc_cfg_shift"] == pytest.approx(want, abs=1e-5)
        assert any("SC-CFG at w = 3" in line for line in decompose.markdown(d))


def test_decompose_builds_no_graph():
    """Every forward of the decomposition runs without autograd (a graph per step would hold
    every activation of 64 rows for the whole trajectory)."""
    seen = []

    class Watched(Table):
        def forward(self, *a, **k):
            seen.append(torch.is_grad_enabled())
            return super().forward(*a, **k)

    model = Watched()
    train, val = FakeLatents(model, *make_rows(40, 0)), FakeLatents(model, *make_rows(16, 1))
    decompose.decompose(model, ENCODER, val, train, FlowConfig(noise_scale=1.0), PRESET, n=16)
    assert seen and not any(seen)
