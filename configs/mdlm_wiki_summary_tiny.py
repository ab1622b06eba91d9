# The conditional masked diffusion baseline (MDLM) of configs/wiki_summary_tiny.py, at equal
# compute: the same paragraph -> description pairs (bundled), tokenizer (MiniLM's WordPiece,
# its [MASK] the absorbing state), rows ([lead <= 24 tokens ; description], 40 tokens, EOS
# padding in the loss), batch, learning rate and 22 training minutes; ELF-tiny's trunk (4 x 256,
# 4 heads). The source is never masked and out of the loss; sampling holds it and unmasks the
# target. Held-out scoring as evaluate.py's for ELF: 128 pairs x 3 seeds at 8 to 128 steps.
#   python -m baselines.mdlm configs/mdlm_wiki_summary_tiny.py     # out/.../heldout/report.md
out_dir = "out/mdlm_wiki_summary_tiny"
dataset = "wiki_summary"
encoder = "minilm"
max_length = 40
max_input_length = 24  # > 0: conditional
token_vocab = "train"  # the rows' ids and [MASK] (as wiki_summary_tiny.py's ELF since 2026-12-07)
depth = 4
hidden = 256
heads = 4
batch_size = 64
optimizer = "adamw"
blr = 4e-3  # lr = 1e-3, configs/wiki_summary_tiny.py's
warmup_steps = 50
max_steps = 1_000_000  # the time limit ends the run
time_limit_min = 22.0  # configs/wiki_summary_tiny.py's training minutes
grad_clip = 1.0
ema_decay = 0.999
ema_warmup = True
log_interval = 10
eval_interval = 250
ckpt_interval = 250
n_samples = 128  # evaluate.py --n 128, as results/cond
sample_seeds = "0,1,2"
sample_steps = "8,16,32,64,128"
reveal = "prob"
