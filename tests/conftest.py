"""Shared fixtures: the bundled encoder, tiny stand-ins for hub models, small text files.
Nothing here touches the network: hub paths are exercised with folders saved to tmp."""

import importlib.util
import json
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# every entry point, as a user runs it from the repository root (python <these> --help ...);
# tests/test_layout.py checks that no file with a __main__ is missing here
COMMANDS = {
    "train": ["train.py"],
    "sample": ["sample.py"],
    "evaluate": ["evaluate.py"],
    "distill": ["distill.py"],
    "ar": ["-m", "baselines.ar"],
    "ar_cond": ["-m", "baselines.ar_cond"],
    "mdlm": ["-m", "baselines.mdlm"],
    "ablate": ["-m", "tools.ablate"],
    "bench": ["-m", "tools.bench"],
    "convert": ["-m", "tools.convert_release"],
    "gpu_check": ["-m", "tools.gpu_check"],
}
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))


def results_table(question: str):
    """results/<question>/table.py as a module (the results folders are not packages)."""
    spec = importlib.util.spec_from_file_location(
        f"{question}_table", os.path.join(ROOT, "results", question, "table.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def minilm():
    from encoder import FrozenEncoder

    return FrozenEncoder("minilm", latent_mean=0.0, latent_std=0.3)


@pytest.fixture(scope="session")
def tiny_t5_dir(tmp_path_factory, minilm):
    """A random 2-layer T5 encoder with the bundled tokenizer, saved like a hub folder."""
    from transformers import T5Config, T5EncoderModel

    d = tmp_path_factory.mktemp("tiny-t5")
    cfg = T5Config(
        vocab_size=len(minilm.tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        pad_token_id=minilm.pad_id,
        eos_token_id=minilm.eos_id,
    )
    torch.manual_seed(0)
    T5EncoderModel(cfg).save_pretrained(d)
    minilm.tokenizer.save_pretrained(d)
    return str(d)


SENTENCES = [
    "The cat sat on the mat.",
    "Paris is the capital of France.",
    "Water boils at one hundred degrees.",
    "The quick brown fox jumps over the lazy dog.",
    "Music is an art form.",
    "Rivers flow to the sea.",
    "The sun is a star.",
    "Bread is made from flour.",
    "Birds can fly south in winter.",
    "A triangle has three sides.",
    "Mount Everest is the highest mountain.",
    "Trees grow from seeds.",
]


@pytest.fixture
def jsonl_file(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text("".join(json.dumps({"text": s}) + "\n" for s in SENTENCES * 4))
    return str(p)


@pytest.fixture
def one_rank_group(tmp_path):
    """A Gloo process group of one rank in this process (what a one-process torchrun starts)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
