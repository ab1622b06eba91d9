# configs/tiny.py trained for 60 minutes instead of 10, with weights-only snapshots at 10, 20
# and 40 minutes (out/tiny_60min/at-<m>min) so that the yardstick can follow the curve. The
# learning rate stays constant, as in the default.
#   python train.py configs/tiny_60min.py
#   python evaluate.py --ckpt out/tiny_60min/at-10min --judge judges/desc --out_dir ...
# The recipe the 10-minute default had when this was measured (last-layer latents, dec_lam_mean
# 1.5, p_mean -0.8) was for ten minutes: at an hour the release's decoder and time distribution
# did better. Measured at 60 minutes with the default's data, trunk and lr,
# the machine's 2 cores shared (judge PPL / real text's, entropy / real, repetition):
#   the release's settings below, 1610 steps: 2.40x, 0.92, 0.10   (results/first_run, "The 60-minute run")
#   that 10-minute recipe,         1419 steps: 4.68x, 0.88, 0.07   (results/compare/hour/curve)
# and the release's settings were ahead at 20 and 40 minutes too (2.84x / 2.20x against
# 5.92x / 5.55x), at more repetition (0.26 / 0.16 against 0.08 / 0.06).
exec(open(__file__.replace("tiny_60min.py", "tiny.py")).read())   # every key of configs/tiny.py, then:
out_dir = "out/tiny_60min"
max_steps = 100_000
time_limit_min = 60.0
snapshot_minutes = "10,20,40"
eval_interval = 250
ckpt_interval = 500
# the release's latents (the last layer), decoder, time distribution, prefix and
# self-conditioning (TrainConfig's defaults): what the hour above measured
encoder_layer = -1
decoder_init = "random"
decoder_prob = 0.2
dec_lam_mean = 0.8
pos_embed = False
p_mean = -1.5
p_std = 0.8
n_prefix = 4
self_cond_prob = 0.5
# the batch, lr and sampler the hour above ran with (configs/tiny.py has since moved to batch 64
# and the uniform grid; its own hour: results/compare/hour_r21, when run)
batch_size = 128
blr = 2e-3
sample_preset = "ode32"
