# ELF-B on OpenWebText, unconditional, length 1024: the paper's run with the authors' released
# settings. TrainConfig's defaults (train.py --help) are this run, so this file only names it:
# T5-small encoder (latents normalised with the released mean 0.0 / std 0.2), ELF-B (12 x 768),
# Muon on every 2-D weight, batch 512 at blr 1e-3 (lr 2e-3), 0.5-epoch warmup, 5 epochs
# (~45.2B effective tokens), EMA 0.9999. Needs a network (hub data and t5-small) and GPUs:
#   python train.py configs/owt_elf_b.py
#   torchrun --nproc_per_node=8 train.py configs/owt_elf_b.py   # 8 GPUs, DDP
out_dir = "out/owt_elf_b"
