"""checkpoint.py: whole-checkpoint atomicity (a crash at every point of a save), the newest
damaged checkpoint skipped, kept folders, permissions, and the converter of the authors'
released checkpoints against an independent description of their parameter layout."""

import copy
import json
import os
import stat

import pytest
import torch

from lib import checkpoint
from model import ELF, ELFConfig
from tools.convert_release import ConvertConfig, convert_release, to_release


def tiny_elf(seed=0, D=8, V=11):
    torch.manual_seed(seed)
    net = ELF(
        ELFConfig(
            latent_dim=D, vocab_size=V, hidden=32, depth=2, heads=2, bottleneck=8, max_seq_len=16
        )
    )
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))  # zero-initialised heads would hide a wrong load
    return net


META = {
    "train": {"encoder": "minilm", "encoder_dtype": "float32", "max_length": 16},
    "latent_stats": {"mean": 0.0, "std": 0.3},
    "flow": {"noise_scale": 2.0},
}


def save(out, net, step, keep=2):
    opt = torch.optim.AdamW(net.parameters())
    net(torch.randn(2, 4, 8), torch.rand(2), torch.rand(2))[0].sum().backward()
    opt.step()  # an optimiser with state
    return checkpoint.save(
        str(out), net, copy.deepcopy(net), opt, step, {**META, "model": net.cfg.__dict__}, keep=keep
    )


def weights(folder):
    return checkpoint.load_state(folder, "model")


def test_layout_latest_pointer_kept_folders_and_permissions(tmp_path):
    out = tmp_path / "run"
    for step in (2, 4, 6):
        save(out, tiny_elf(step), step)
    assert (out / "latest").read_text().strip() == "step-00000006"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("step-")) == [
        "step-00000004",
        "step-00000006",
    ]
    assert checkpoint.find(str(out)) == str(out / "step-00000006")
    model, meta = checkpoint.load(str(out), which="model")
    assert meta["step"] == 6 and json.loads((out / "config.json").read_text())["step"] == 6
    for f in (out / "step-00000006").iterdir():  # ordinary permissions, not 0600
        assert stat.S_IMODE(f.stat().st_mode) & 0o044 == 0o044, f
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


# the writes of one save, in order: model, optim, config, manifest (each renamed into the
# temporary step folder), the step folder renamed into place, `latest`, the config copy
REPLACES = 7


@pytest.mark.parametrize("crash_at", range(1, REPLACES + 1))
def test_a_crash_at_any_point_of_a_save_leaves_the_old_or_the_new_checkpoint(
    tmp_path, monkeypatch, crash_at
):
    out = tmp_path / "run"
    old, new = tiny_elf(1), tiny_elf(2)
    save(out, old, 2)
    calls = {"n": 0}
    real_replace = os.replace

    def crashing_replace(a, b):
        calls["n"] += 1
        if calls["n"] == crash_at:
            raise KeyboardInterrupt("simulated crash")
        real_replace(a, b)

    monkeypatch.setattr(checkpoint.os, "replace", crashing_replace)
    with pytest.raises(KeyboardInterrupt):
        save(out, new, 4)
    monkeypatch.setattr(checkpoint.os, "replace", real_replace)
    folder = checkpoint.find(str(out))
    got = weights(folder)
    want = {2: old, 4: new}[checkpoint.read_meta(folder)["step"]]
    assert all(torch.equal(got[k], v) for k, v in want.state_dict().items())
    # which one: the old until `latest` names the new (the 6th write), then the new
    assert checkpoint.read_meta(folder)["step"] == (2 if crash_at <= 6 else 4)
    save(out, new, 6)  # the next save cleans the leftovers
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp")]


def test_a_damaged_newest_checkpoint_is_skipped(tmp_path, capsys):
    out = tmp_path / "run"
    save(out, tiny_elf(1), 2)
    save(out, tiny_elf(2), 4)
    newest = out / "step-00000004" / "model.safetensors"
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated on disk
    assert checkpoint.find(str(out)) == str(out / "step-00000002")
    assert "skipping damaged checkpoint" in capsys.readouterr().out
    model, meta = checkpoint.load(str(out), which="model")
    assert meta["step"] == 2


def test_pruning_keeps_a_good_older_checkpoint_past_a_damaged_newer_one(tmp_path):
    """Resumed from step 2 past a damaged step 4, the save of step 3 keeps step 2 (the newest
    older one that verifies) and leaves the damaged step 4 alone."""
    out = tmp_path / "run"
    save(out, tiny_elf(1), 2, keep=3)
    save(out, tiny_elf(2), 4, keep=3)
    (out / "step-00000004" / "model.safetensors").write_bytes(b"damaged")
    save(out, tiny_elf(3), 3, keep=2)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("step-")) == [
        "step-00000002",
        "step-00000003",
        "step-00000004",
    ]
    save(out, tiny_elf(4), 5, keep=2)  # now 3 is the good older one; 2 goes
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("step-")) == [
        "step-00000003",
        "step-00000005",
    ]


def test_flat_layout_of_older_runs_still_loads(tmp_path):
    folder = save(tmp_path / "run", tiny_elf(3), 2)
    flat = tmp_path / "flat"
    flat.mkdir()
    for f in ("model.safetensors", "optim.pt", "config.json"):
        (flat / f).write_bytes((tmp_path / "run" / "step-00000002" / f).read_bytes())
    assert checkpoint.find(str(flat)) == str(flat)
    assert all(
        torch.equal(a, b) for a, b in zip(weights(str(flat)).values(), weights(folder).values())
    )


# ----------------------------------------------------------------------------------------
# the released layout, written down independently of checkpoint.py (the parameter table of
# the authors' release) for width H, latent D, bottleneck b, vocabulary V, heads n, SwiGLU h


def release_layout(D, V, H, b, depth, n):
    h, hd = int(4 * H * 2 / 3), H // n
    names = {
        "self_cond_proj.weight": (D, 2 * D),
        "self_cond_proj.bias": (D,),
        "text_proj.proj1.weight": (b, D),
        "text_proj.proj2.weight": (H, b),
        "text_proj.proj2.bias": (H,),
        "t_emb_tokens": (1, 4, H),
        "self_cond_cfg_tokens": (1, 4, H),
        "mode_tokens": (1, 4, H),
        "final_layer.norm_final.weight": (H,),
        "final_layer.linear.weight": (D, H),
        "final_layer.linear.bias": (D,),
        "proj_kernel": (H, D),
        "proj_bias": (D,),
        "unembed_kernel": (D, V),
        "unembed_bias": (V,),
    }
    for emb in ("t_embedder", "self_cond_cfg_embedder"):
        names.update(
            {
                f"{emb}.mlp_0.weight": (H, 256),
                f"{emb}.mlp_0.bias": (H,),
                f"{emb}.mlp_2.weight": (H, H),
                f"{emb}.mlp_2.bias": (H,),
            }
        )
    for i in range(depth):
        names.update(
            {
                f"blocks.{i}.norm1.weight": (H,),
                f"blocks.{i}.norm2.weight": (H,),
                f"blocks.{i}.attn.qkv.weight": (3 * H, H),
                f"blocks.{i}.attn.qkv.bias": (3 * H,),
                f"blocks.{i}.attn.q_norm.weight": (hd,),
                f"blocks.{i}.attn.k_norm.weight": (hd,),
                f"blocks.{i}.attn.proj.weight": (H, H),
                f"blocks.{i}.attn.proj.bias": (H,),
                f"blocks.{i}.mlp.w12.weight": (2 * h, H),
                f"blocks.{i}.mlp.w12.bias": (2 * h,),
                f"blocks.{i}.mlp.w3.weight": (H, h),
                f"blocks.{i}.mlp.w3.bias": (H,),
            }
        )
    return names


def test_converter_reads_the_released_layout(tmp_path):
    D, V, H, b, depth, n = 8, 11, 32, 8, 2, 2
    layout = release_layout(D, V, H, b, depth, n)
    torch.manual_seed(0)
    params = {k: torch.randn(shape) for k, shape in layout.items()}
    torch.save(
        {"params": params, "ema_params1": {k: v + 1 for k, v in params.items()}}, tmp_path / "r.pt"
    )
    convert_release(
        ConvertConfig(str(tmp_path / "r.pt"), str(tmp_path / "c"), encoder="minilm", max_length=16)
    )
    model, meta = checkpoint.load(str(tmp_path / "c"), which="model")
    assert (
        meta["model"]["hidden"],
        meta["model"]["depth"],
        meta["model"]["heads"],
        meta["model"]["bottleneck"],
    ) == (H, depth, n, b)
    sd = model.state_dict()
    # (in, out) kernels
    assert torch.equal(sd["decoder_head.unembed.weight"], params["unembed_kernel"].T)
    assert torch.equal(sd["decoder_head.proj.weight"], params["proj_kernel"].T)
    assert torch.equal(sd["blocks.1.mlp.w12.weight"], params["blocks.1.mlp.w12.weight"])
    ema, _ = checkpoint.load(str(tmp_path / "c"))
    assert torch.equal(ema.state_dict()["mode_tokens"], params["mode_tokens"] + 1)
    # and our own network saved in the released layout has exactly these names and shapes
    ours = to_release(
        ELF(
            ELFConfig(latent_dim=D, vocab_size=V, hidden=H, depth=depth, heads=n, bottleneck=b)
        ).state_dict()
    )
    assert {k: tuple(v.shape) for k, v in ours.items()} == layout


def test_converter_round_trip_fallback_and_conditional_settings(tmp_path, capsys):
    net, ema = tiny_elf(0), tiny_elf(1)
    path = tmp_path / "release.pt"
    torch.save(
        {"params": to_release(net.state_dict()), "ema_params1": to_release(ema.state_dict())}, path
    )
    convert_release(
        ConvertConfig(str(path), str(tmp_path / "conv"), encoder="minilm", max_length=16)
    )
    for which, ref in (("model", net), ("ema", ema)):
        back, meta = checkpoint.load(str(tmp_path / "conv"), which=which)
        z, t, w = torch.randn(2, 6, 8), torch.rand(2), torch.rand(2)
        dec = torch.tensor([True, False])
        a, b = ref(z, t, w, z, dec, torch.arange(2)), back(z, t, w, z, dec, torch.arange(2))
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert meta["latent_stats"]["std"] == 0.2 and meta["train"]["max_input_length"] == 0
    # a release without EMA weights: the raw weights serve for both, with a warning
    torch.save({"params": to_release(net.state_dict()), "ema_params1": None}, path)
    convert_release(
        ConvertConfig(
            str(path),
            str(tmp_path / "noema"),
            encoder="minilm",
            max_length=128,
            max_input_length=64,
        )
    )
    assert "no EMA weights" in capsys.readouterr().out
    back, meta = checkpoint.load(str(tmp_path / "noema"))
    assert all(torch.equal(back.state_dict()[k], v) for k, v in net.state_dict().items())
    assert meta["train"]["max_input_length"] == 64 and meta["train"]["sample_preset"] == "cond64"
    assert meta["flow"]["decoder_noise_scale"] == 1.0


@pytest.mark.parametrize(
    "content,message",
    [(b"", "not a readable torch file"), (b"not a zip file at all", "not a readable torch file")],
)
def test_converter_bad_files_are_one_line_errors(tmp_path, content, message):
    (tmp_path / "bad.pt").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        convert_release(ConvertConfig(str(tmp_path / "bad.pt"), str(tmp_path / "x")))
    torch.save({"params": {"foo": torch.zeros(1)}}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not the ELF release layout"):
        convert_release(ConvertConfig(str(tmp_path / "other.pt"), str(tmp_path / "x")))
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "free,message",
    [
        (0, "no space left on the disk of .*/run while saving step 4"),
        (1 << 40, "RuntimeError: .*file write failed in .*/run while saving step 4"),
    ],
)
def test_a_failed_save_removes_its_temporary_folder_and_keeps_the_previous_one(
    tmp_path, monkeypatch, free, message
):
    """torch.save on a full disk raises a RuntimeError that names no cause ("file write
    failed"); the free space tells a full disk from other failures."""
    import collections

    out = tmp_path / "run"
    save(out, tiny_elf(1), 2)

    def failing(obj, path, *a, **k):
        with open(path, "wb") as f:
            f.write(b"\0" * 1000)
        raise RuntimeError(
            "[enforce fail at inline_container.cc:603] . PytorchStreamWriter "
            "failed writing file data/0: file write failed"
        )

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(checkpoint.torch, "save", failing)
    monkeypatch.setattr(
        checkpoint.shutil, "disk_usage", lambda p: usage(1 << 40, (1 << 40) - free, free)
    )
    with pytest.raises(
        ValueError, match=f"{message}; the previous checkpoint \\(step-00000002\\) is intact"
    ):
        save(out, tiny_elf(2), 4)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "latest", "step-00000002"]
    assert checkpoint.read_meta(checkpoint.find(str(out)))["step"] == 2


def test_the_converter_replaces_a_run_folder_only_when_asked(tmp_path, capsys):
    path = tmp_path / "release.pt"
    torch.save({"params": to_release(tiny_elf(0).state_dict()), "ema_params1": None}, path)
    run = tmp_path / "run"
    save(run, tiny_elf(5), 7)  # somebody's training run
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run.rglob("*"))
    with pytest.raises(
        ValueError, match="out_dir .*/run already holds a checkpoint: --overwrite replaces it"
    ):
        convert_release(ConvertConfig(str(path), str(run), encoder="minilm", max_length=16))
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run.rglob("*")) == before
    convert_release(
        ConvertConfig(str(path), str(run), encoder="minilm", max_length=16, overwrite=True)
    )
    assert sorted(p.name for p in run.iterdir()) == [
        ".kind",
        "config.json",
        "latest",
        "step-00000000",
    ]
