# configs/tiny.py trained for 60 minutes instead of 10, with weights-only snapshots at 10, 20
# and 40 minutes (out/tiny_60min/at-<m>min) so that the yardstick can follow the curve. The
# learning rate stays constant, as in the default.
#   python train.py configs/tiny_60min.py
#   python evaluate.py --ckpt out/tiny_60min/at-10min --judge judges/desc_wiki --out_dir eval/10min
# The hour beside masked diffusion and autoregression: results/compare/README.md.
# every key of configs/tiny.py, then:
exec(open(__file__.replace("tiny_60min.py", "tiny.py")).read())
out_dir = "out/tiny_60min"
max_steps = 100_000
time_limit_min = 60.0
snapshot_minutes = "10,20,40"
eval_interval = 250
ckpt_interval = 500
