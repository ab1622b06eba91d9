# The offline CPU default: ELF-tiny on the one-line descriptions of the bundled Wikipedia
# articles ("Genus of flowering plants", "Country in West Africa"; ~9.4k training texts,
# median 9 tokens), with the bundled all-MiniLM-L6-v2 as the frozen encoder. About 10
# minutes on 2 CPU cores, encoding included. The setting comes from the search recorded in
# results/first_run/ (every run, its yardstick figures and the command that made it).
#   python train.py configs/tiny.py
out_dir = "out/tiny"
dataset = "wiki_descriptions"
encoder = "minilm"
encoder_dtype = "bfloat16"   # frozen encoder under bf16 autocast: 2x faster encoding on this CPU
latent_mean = None           # estimated from the training latents (stored with the checkpoint)
latent_std = None
model = "tiny"
max_length = 16              # one description per row (98.7% fit), padded with EOS
packing = False
pad_token = "eos"
latent_cache = True
batch_size = 128
optimizer = "adamw"          # Muon: +0.25-1.2 s a step on 2 cores, and behind at this lr (README, Scaling up)
blr = 2e-3                   # lr = blr * 128 / 256 = 1e-3 (AdamW)
warmup_steps = 30
max_steps = 370
log_interval = 10
eval_interval = 100
eval_batches = 4
ckpt_interval = 100
ema_decay = 0.999
ema_warmup = True
n_samples = 8
sample_preset = "uncond32"
