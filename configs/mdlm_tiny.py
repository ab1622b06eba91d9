# The masked diffusion baseline (MDLM) of the offline default (configs/tiny.py), at equal
# compute: the same data (the bundled one-line descriptions), the same tokenizer (MiniLM's
# WordPiece, its [MASK] the absorbing state; embedding and head over the ids the rows hold),
# the same rows (16 tokens, one description a row, [CLS] ... [SEP], EOS padding in the
# loss), the same batch order, the same trunk (4 x 256, 4 heads), batch and learning rate, and
# the same 8.5 training minutes on the same machine. Samples: 64 per seed for 3 seeds at 4, 8
# and 16 steps (16 = one token a step).
#   python -m baselines.mdlm configs/mdlm_tiny.py
#   python evaluate.py --samples out/mdlm_tiny/samples-16steps.jsonl --ckpt out/tiny \
#       --judge judges/desc_wiki
out_dir = "out/mdlm_tiny"
dataset = "wiki_descriptions"
encoder = "minilm"
max_length = 16
packing = False
pad_token = "eos"
framing = True
hold_first = True  # every row starts with [CLS]: held at position 0, as the data has it
depth = 4
hidden = 256
heads = 4
batch_size = 128
optimizer = "adamw"
blr = 2e-3  # lr = 1e-3, configs/tiny.py's
warmup_steps = 30
max_steps = 1_000_000  # the time limit ends the run
time_limit_min = 8.5  # configs/tiny.py's training minutes
grad_clip = 1.0
ema_decay = 0.999
ema_warmup = True
log_interval = 10
eval_interval = 100
ckpt_interval = 100
n_samples = 64
sample_seeds = "0,1,2"
sample_steps = "4,8,16"
reveal = "prob"
token_vocab = "train"  # as configs/tiny.py's token_vocab: embedding, head for the rows' ids
