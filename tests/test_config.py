"""train.py's configurator: types, unknown keys, file-then-override precedence."""

import pytest

from lib.config import TrainConfig, comma_list, parse_train


def write(tmp_path, text):
    p = tmp_path / "cfg.py"
    p.write_text(text)
    return str(p)


def test_defaults_file_then_overrides(tmp_path):
    path = write(
        tmp_path, "import math\nbatch_size = 8\nblr = 2e-3\nout_dir = 'out/x'\n_private = 1\n"
    )
    cfg = parse_train([path])
    assert (cfg.batch_size, cfg.blr, cfg.out_dir) == (8, 2e-3, "out/x")
    assert cfg.max_steps == TrainConfig().max_steps  # untouched default
    cfg = parse_train([path, "--batch_size=16", "--out_dir=a=b", "--latent_cache=true"])
    # split on the first '='
    assert (cfg.batch_size, cfg.out_dir, cfg.latent_cache) == (16, "a=b", True)


def test_types_are_checked_and_converted(tmp_path):
    cfg = parse_train(["--blr=1", "--latent_std=0.2", "--packing=false", "--ema_decay=0.99"])
    assert cfg.blr == 1.0 and isinstance(cfg.blr, float)  # int is fine for a float
    assert cfg.latent_std == 0.2 and cfg.packing is False
    assert parse_train(["--latent_std=none"]).latent_std is None
    with pytest.raises(ValueError, match="'batch_size' expects int"):
        parse_train(["--batch_size=1.5"])
    with pytest.raises(ValueError, match="'packing' expects a bool"):
        parse_train(["--packing=maybe"])
    with pytest.raises(ValueError, match="'max_steps' expects int"):
        parse_train([write(tmp_path, "max_steps = '100'\n")])
    assert parse_train([write(tmp_path, "blr = 3\n")]).blr == 3.0


def test_unknown_keys_are_rejected_with_their_name(tmp_path):
    with pytest.raises(ValueError, match="unknown config key 'batchsize'"):
        parse_train(["--batchsize=3"])
    with pytest.raises(ValueError, match="unknown config key 'lr_typo' in"):
        parse_train([write(tmp_path, "lr_typo = 1.0\n")])
    with pytest.raises(ValueError, match="expected --key=value or --key value, got 'stray'"):
        parse_train(["--max_steps=3", "stray"])
    with pytest.raises(ValueError, match="config key 'max_steps' needs a value"):
        parse_train(["--max_steps"])
    with pytest.raises(FileNotFoundError, match="config file not found"):
        parse_train(["configs/nope.py"])


def test_space_separated_values_bare_flags_and_help(tmp_path, capsys):
    a = parse_train(["--max_steps", "3", "--packing", "false", "--latent_cache", "--out_dir", "x"])
    b = parse_train(["--max_steps=3", "--packing=false", "--latent_cache=true", "--out_dir=x"])
    assert a == b and a.latent_cache and not a.packing
    with pytest.raises(SystemExit) as e:
        parse_train(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("usage: python")
    assert "--batch_size (int, default 512)" in out and "lr = blr * batch_size / 256" in out
    # a comment above its key, over two lines, is its note too; a section's heading is no one's
    line = next(x for x in out.splitlines() if "--token_vocab" in x)
    assert "'full' (released) or 'train'" in line and "not comparable to 'full')" in line
    assert "I/O" not in next(x for x in out.splitlines() if "--out_dir" in x)
    assert "optimisation" not in next(x for x in out.splitlines() if "--optimizer " in x)


def test_config_file_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(ValueError, match=r"cfg.py:2: invalid syntax|cfg.py:2: .*"):
        parse_train([write(tmp_path, "batch_size = 8\nmax_steps = = 3\n")])
    with pytest.raises(
        ValueError, match=r"cfg.py:3: NameError: name 'undefined_name' is not defined"
    ):
        parse_train([write(tmp_path, "batch_size = 8\n\nmax_steps = undefined_name\n")])


def test_semantic_checks():
    with pytest.raises(ValueError, match="init_from"):
        parse_train(["--init_from=latest"])
    with pytest.raises(ValueError, match="unknown model .ELF-XXL."):
        parse_train(["--model=ELF-XXL"])
    with pytest.raises(ValueError, match="exceeds the model's RoPE table"):
        parse_train(["--max_length=2048", "--max_seq_len=1024"])


def test_comma_lists_of_numbers_and_of_names():
    assert comma_list("seeds", "0,1,2") == [0, 1, 2]
    assert comma_list("t", "0.5,2", float) == [0.5, 2.0]
    names = ("step", "train", "sample")
    assert comma_list("stages", "train,step", str, allowed=names) == ["train", "step"]
    for raw in ("0,x", "", "1,,2"):
        with pytest.raises(ValueError, match=f"^'seeds' expects a comma list of int, got '{raw}'$"):
            comma_list("seeds", raw)
    for raw in ("train,", ",step", ""):  # an empty name is no name
        with pytest.raises(ValueError, match=f"^'stages' expects a comma list of str, got '{raw}'"):
            comma_list("stages", raw, str, allowed=names)
    with pytest.raises(ValueError) as e:
        comma_list("stages", "step,flops", str, allowed=names)
    assert str(e.value) == (
        "unknown stages 'flops' in 'step,flops' (choose from step, train, sample)"
    )


def test_shipped_configs_parse():
    import glob
    import os

    from baselines import ar, ar_cond, mdlm
    from lib.config import parse

    # distill.py's, the conditional AR baseline's, the AR baseline's (and judge's), mdlm.py's:
    # the first prefix that matches
    other = {
        "distill_": None,
        "ar_de_en": ar_cond.ARCondConfig,
        "ar_wiki_summary": ar_cond.ARCondConfig,
        "ar_": ar.ARConfig,
        "mdlm_": mdlm.MDLMConfig,
    }
    paths = sorted(glob.glob("configs/*.py"))
    assert "configs/tiny.py" in paths and "configs/owt_elf_b.py" in paths
    for p in paths:
        kind = next((v for k, v in other.items() if os.path.basename(p).startswith(k)), "train")
        if kind == "train":
            parse_train([p])
        elif kind is not None:
            parse([p], kind)


BAD = {"at_least_1": 0, "non_negative": -1, "positive": 0, "probability": 1.5, "fraction": 1.0}


@pytest.mark.parametrize("cls", ["train", "distill", "sample"])
def test_every_declared_check_is_enforced_and_every_key_is_in_help(cls, capsys):
    """A key's check is declared beside it (Annotated[type, check]) and parse enforces it: a
    value out of every declared range, or outside every declared choice, is one line naming
    the key; --help lists every key. A new knob gets both by being declared."""
    from distill import DistillConfig
    from lib.config import declared_checks, parse
    from sample import SampleConfig

    klass = {"train": TrainConfig, "distill": DistillConfig, "sample": SampleConfig}[cls]
    checks = declared_checks(klass)
    assert len(checks) >= 5
    for key, rule in checks.items():
        bad = "not-a-choice" if isinstance(rule, tuple) else BAD[rule]
        with pytest.raises(ValueError, match=key):
            parse([f"--{key}={bad}"], klass)
    with pytest.raises(SystemExit):
        parse(["--help"], klass)
    out = capsys.readouterr().out
    import dataclasses

    assert all(f"--{f.name} (" in out for f in dataclasses.fields(klass))


def test_the_model_and_objective_knobs_are_train_keys_with_their_checks():
    """TrainConfig inherits model.ModelKnobs and flow.FlowConfig: their keys, defaults and
    checks, declared once."""
    import dataclasses

    from flow import FlowConfig
    from lib.config import declared_checks
    from model import ModelKnobs

    train_fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for part in (ModelKnobs, FlowConfig):
        for f in dataclasses.fields(part):
            assert train_fields[f.name] == f.default, f.name
        assert declared_checks(part).items() <= declared_checks(TrainConfig).items()
    with pytest.raises(ValueError, match="bottleneck must be >= 0"):
        parse_train(["--bottleneck=-1"])
    with pytest.raises(ValueError, match="unknown prediction 'q'"):
        parse_train(["--prediction=q"])


# each baseline's checks of one key (a range, or the choices): {rule: keys} and {key: choices}
BASELINE_RANGES = {
    "ar": {
        "at_least_1": "length n_layer n_embd n_head batch_size steps vocab sample_length",
        "positive": "lr temperature",
        "non_negative": "warmup_steps weight_decay time_limit_min n_samples threads",
    },
    "ar_cond": {
        "at_least_1": "max_length n_layer n_embd n_head batch_size max_steps ckpt_interval "
        "sample_batch",
        "positive": "lr",
        "non_negative": "warmup_steps weight_decay time_limit_min n_samples threads val_size",
    },
    "mdlm": {
        "at_least_1": "batch_size max_length max_steps eval_interval ckpt_interval log_interval "
        "eval_batches keep_checkpoints depth hidden heads sample_batch",
        "positive": "blr grad_clip rope_theta",
        "fraction": "ema_decay t_min",
        "non_negative": "warmup_steps time_limit_min val_size n_samples",
    },
}
WORDS = {  # the words of each range's error, as they were before the keys declared them
    "at_least_1": "be >= 1",
    "non_negative": "be >= 0",
    "positive": "be > 0",
    "fraction": "lie in (0, 1)",
}
BASELINE_CHOICES = {
    "ar": {"token_vocab": ("full", "train")},
    "ar_cond": {"init_from": ("scratch", "resume"), "token_vocab": ("full", "train")},
    "mdlm": {
        "init_from": ("scratch", "resume"),
        "reveal": ("prob", "count"),
        "optimizer": ("adamw", "muon"),
        "muon_params": ("all", "blocks"),
        "pad_token": ("pad", "eos"),
        "lr_schedule": ("constant", "cosine"),
        "token_vocab": ("full", "train"),
    },
}


@pytest.mark.parametrize("name", sorted(BASELINE_RANGES))
def test_the_baselines_declare_their_checks(name, tmp_path):
    """The AR, conditional AR and MDLM baselines declare each key's range or choices in its
    annotation, as train.py's keys do (one mechanism): a bad value on their command line is
    the same one line as before, and nothing is written."""
    from baselines import ar, ar_cond, mdlm
    from lib.config import declared_checks

    module = {"ar": ar, "ar_cond": ar_cond, "mdlm": mdlm}[name]
    klass = {"ar": ar.ARConfig, "ar_cond": ar_cond.ARCondConfig, "mdlm": mdlm.MDLMConfig}[name]
    out = f"--{'out' if name == 'ar' else 'out_dir'}={tmp_path / 'run'}"
    expected = {k: rule for rule, keys in BASELINE_RANGES[name].items() for k in keys.split()}
    expected.update(BASELINE_CHOICES[name])
    assert expected.items() <= declared_checks(klass).items()
    for key, rule in expected.items():
        if isinstance(rule, tuple):
            bad, words = "bogus", f"unknown {key} 'bogus' (choose from {', '.join(rule)})"
        else:
            bad = BAD[rule]
            shown = float(bad) if isinstance(getattr(klass(), key), float) else bad
            words = f"{key} must {WORDS[rule]}, got {shown}"
        with pytest.raises(ValueError) as e:
            module.main([f"--{key}={bad}", out])
        assert str(e.value) == words
    assert not (tmp_path / "run").exists()
