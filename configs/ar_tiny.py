# The autoregressive baseline of the offline default (configs/tiny.py), at equal compute: the
# same data (the bundled one-line descriptions), the same tokenizer (MiniLM's WordPiece), a
# GPT-2 trunk of the same width and depth (4 x 256, 4 heads), the same 10 minutes of wall
# clock on the same machine; sampled at temperature 1, 64 texts of at most 15 tokens for each
# of 3 seeds (ELF's rows: 16 tokens with the EOS). Results: results/compare/README.md
# (and results/first_run/README.md).
#   python -m baselines.ar configs/ar_tiny.py
#   python evaluate.py --samples out/ar_tiny/samples.jsonl --ckpt out/tiny --judge judges/desc_wiki
data = "wiki_descriptions"
out = "out/ar_tiny"
tokenizer = "minilm"
normalize = ""  # MiniLM's tokenizer already reads text the way ELF's samples read
# descriptions packed with EOS between them: 2048 tokens a step, as ELF's 128 x 16
length = 64
batch_size = 32
n_layer = 4
n_embd = 256
n_head = 4
lr = 1e-3
warmup_steps = 50
steps = 1_000_000
time_limit_min = 10.0
seed = 1
n_samples = 64
sample_seeds = "0,1,2"
sample_length = 15
token_vocab = "train"  # as configs/tiny.py's token_vocab: embedding, output for the rows' ids
# early stopping: the model of lowest dev-split loss (and its samples) also in out/best, the
# clock stopped while it scores (the same steps as without)
keep_best = True
