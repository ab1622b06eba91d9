# ELF-M (24 x 1056, 342M) on OpenWebText: configs/owt_elf_b.py with the larger network; no
# separate batch or learning rate was published, so ELF-B's are kept.
#   torchrun --nproc_per_node=8 train.py configs/owt_elf_m.py
out_dir = "out/owt_elf_m"
model = "ELF-M"
