# Offline CPU demo of conditional generation, summarisation: each bundled Wikipedia paragraph -> its one-line
# description (~9.4k training pairs, 488 held out by a hash of the title):
#   python train.py configs/wiki_summary_tiny.py                            # ~30 min on 2 cores
#   python evaluate.py --ckpt out/wiki_summary_tiny --out_dir eval/wiki_summary   # ROUGE-1/2/L
out_dir = "out/wiki_summary_tiny"
dataset = "wiki_summary"
encoder = "minilm"
latent_mean = None                    # estimated from the training latents
latent_std = None
encoder_dtype = "auto"                # bf16 where the CPU has it natively, else float32
model = "tiny"
max_length = 64                       # [paragraph lead <= 48 tokens ; description <= 16], padded with EOS
max_input_length = 48
latent_cache = True
label_drop_prob = 0.1
decoder_noise_scale = 1.0
batch_size = 32
optimizer = "adamw"
blr = 1.6e-2                          # lr 2e-3
warmup_steps = 50
max_steps = 3000                      # or time_limit_min, whichever comes first
time_limit_min = 22.0                 # training minutes: with ~4 min of encoding, the run stays under 30
eval_interval = 200
eval_batches = 4
ckpt_interval = 200
ema_decay = 0.999
ema_warmup = True
n_samples = 4
sample_preset = "cond64"
sample_steps = 32
