# The conditional autoregressive baseline of configs/wiki_summary_tiny.py, at equal compute:
# the same paragraph -> description pairs (the bundled Wikipedia articles), tokenizer (MiniLM's
# WordPiece), rows ([paragraph lead <= 24 tokens ; description], 40 tokens, EOS padding),
# batch, learning rate and 22 training minutes; a GPT-2 of ELF-tiny's width and depth
# (4 x 256, 4 heads), the loss on the target only. Held-out scoring as evaluate.py's for ELF:
# greedy, and sampled at temperature 1 for 3 seeds.
#   python -m baselines.ar_cond configs/ar_wiki_summary_tiny.py   # out/.../heldout/report.md
out_dir = "out/ar_wiki_summary_tiny"
dataset = "wiki_summary"
encoder = "minilm"
max_length = 40
max_input_length = 24
token_vocab = "train"  # the rows' ids (as configs/wiki_summary_tiny.py's ELF since 2026-12-07)
n_layer = 4
n_embd = 256
n_head = 4
batch_size = 64
lr = 1e-3  # configs/wiki_summary_tiny.py's: blr 4e-3 x 64 / 256
warmup_steps = 50
max_steps = 100_000  # the time limit ends the run
time_limit_min = 22.0  # configs/wiki_summary_tiny.py's training minutes
ckpt_interval = 250
n_samples = 128  # evaluate.py --n 128, as results/cond
decode = "greedy,sample"
sample_seeds = "0,1,2"
