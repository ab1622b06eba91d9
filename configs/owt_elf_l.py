# ELF-L (32 x 1280, 652M) on OpenWebText: configs/owt_elf_b.py with the largest network, its
# blocks recomputed in backward to fit length 1024 in memory.
#   torchrun --nproc_per_node=8 train.py configs/owt_elf_l.py
out_dir = "out/owt_elf_l"
model = "ELF-L"
grad_ckpt = True
