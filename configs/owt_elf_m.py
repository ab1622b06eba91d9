# ELF-M on OpenWebText, unconditional, length 1024 (ELF_SPEC §4, §5, §7) [release settings].
# Needs a network (hub data and t5-small) and GPUs:
#   python train.py configs/owt_elf_m.py
#   torchrun --nproc_per_node=8 train.py configs/owt_elf_m.py   # 8 GPUs, DDP
out_dir = "out/owt_elf_m"
dataset = "Skylion007/openwebtext"   # ~8M documents, ~9B tokens; 500 held out for validation
encoder = "t5-small"
latent_mean = 0.0                     # released T5-small statistics
latent_std = 0.2
model = "ELF-M"
max_length = 1024
max_seq_len = 1024
packing = True
latent_cache = False                  # 9B tokens x 512 dims: encode on the fly
optimizer = "muon"                    # §7: Muon on every 2-D weight, NAdam-like Adam on the rest
muon_params = "all"                   # the authors' choice (vocabulary projection included)
batch_size = 512                      # as ELF-B (no separate value published); global batch; lr = blr * 512 / 256 = 2e-3
blr = 1e-3
warmup_steps = 8620                   # 0.5 epoch: ~9.04B tokens / (512 x 1024) = 17.2k steps per epoch
max_steps = 86200                     # 5 epochs ~ 45.2B effective tokens [paper]
ema_decay = 0.9999
noise_scale = 2.0
decoder_prob = 0.2
decoder_noise_scale = 5.0
self_cond_prob = 0.5
eval_interval = 2000
ckpt_interval = 2000
