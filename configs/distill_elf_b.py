# Progressive distillation of ELF-B on OpenWebText (METHOD.md, "Distillation") [release settings]:
# five rounds, spans 1/16, 1/8, 1/4, 1/2, 1 (16 -> 1 sampling steps), each about one epoch,
# Muon blr 1e-3 with a 0.1-epoch warmup; K = 4 teacher Euler sub-steps per span.
# The teacher is a train.py run of configs/owt_elf_b.py (its data, encoder, length 1024):
#   python distill.py configs/distill_elf_b.py --teacher out/owt_elf_b --curriculum
#   python sample.py --ckpt out/distill_elf_b/round5 --preset fewstep1 --grid uniform
out_dir = "out/distill_elf_b"
spans = "1/16,1/8,1/4,1/2,1"
# as the teacher; t5-small and max_length 1024 come from its checkpoint
dataset = "Skylion007/openwebtext"
latent_cache = False  # 9B tokens x 512 dims: encode on the fly
teacher_substeps = 4
decoder_prob = 0.2
self_cond_prob = 0.5
optimizer = "muon"
muon_params = "all"
batch_size = 512  # lr = blr * 512 / 256 = 2e-3
blr = 1e-3
steps_per_round = 17240  # ~1 epoch: ~9.04B tokens / (512 x 1024) per step
warmup_steps = 1724  # 0.1 epoch
grad_clip = 1.0
ema_decay = 0.9999
log_interval = 100
