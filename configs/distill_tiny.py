# Progressive distillation of the tiny CPU teacher (configs/tiny.py) into 1-16-step students
# (METHOD.md, "Distillation"): five rounds, spans 1/16, 1/8, 1/4, 1/2, 1. The teacher's data,
# encoder, length and latent cache are reused. A few minutes on 2 CPU cores for the five rounds.
#   python train.py configs/tiny.py                                           # the teacher
#   python distill.py configs/distill_tiny.py --teacher out/tiny --curriculum
#   python evaluate.py --distill out/distill_tiny --ckpt out/tiny --judge judges/desc_wiki
out_dir = "out/distill_tiny"
spans = "1/16,1/8,1/4,1/2,1"
teacher_substeps = 4
# decoder_prob and self_cond_prob: the teacher's (the default trains without self-conditioning,
# so its students do too, and are sampled with --sc_cfg 1: results/distill_tiny)
optimizer = "adamw"  # as the teacher: Muon costs more a step on a CPU
batch_size = 32
blr = 2.4e-3  # lr = blr * 32 / 256 = 3e-4: fine-tuning; 1e-3 made the raw weights wander
# ~0.27 epoch of the 9.4k descriptions: the CPU budget, not the paper's ~1 epoch
steps_per_round = 80
warmup_steps = 8  # 0.1 round
ema_decay = 0.97  # no EMA warmup: the EMA starts from the (good) initial weights
ema_warmup = False
log_interval = 10
