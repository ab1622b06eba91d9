# The offline CPU default: ELF-tiny on the bundled Wikipedia paragraphs with the bundled
# all-MiniLM-L6-v2 encoder. About 10 minutes on 2 CPU cores, encoding included.
#   python train.py configs/tiny.py
out_dir = "out/tiny"
dataset = "wiki"
encoder = "minilm"
encoder_dtype = "bfloat16"   # frozen encoder under bf16 autocast: 2x faster encoding on this CPU
model = "tiny"
max_length = 64
max_seq_len = 64
latent_cache = True
batch_size = 32
optimizer = "adamw"           # Muon: +0.25-1.2 s a step on 2 cores, and behind at this lr (README, Scaling up)
blr = 8e-3                   # lr = blr * 32 / 256 = 1e-3 (AdamW)
warmup_steps = 30
max_steps = 400
eval_interval = 100
eval_batches = 4
ckpt_interval = 200
ema_decay = 0.999
ema_warmup = True
decoder_noise_scale = 5.0
n_samples = 4
sample_steps = 32
