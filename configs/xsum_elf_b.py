# ELF-B on XSum extreme summarisation, document -> one-sentence summary (METHOD.md,
# "Conditional generation") [release settings: TrainConfig's defaults where this file is
# silent]; paper: ROUGE-1/2/L 36.0 / 12.2 / 27.8. Needs a network and GPUs:
#   torchrun --nproc_per_node=8 train.py configs/xsum_elf_b.py
#   python evaluate.py --ckpt out/xsum_elf_b --n 11334 --out_dir eval/xsum           # test ROUGE
out_dir = "out/xsum_elf_b"
dataset = "EdinburghNLP/xsum"  # 204k train documents
source_column = "document"
target_column = "summary"
val_split = "test"
max_length = 1088  # [document <= 1024 ; summary], padded with EOS
max_input_length = 1024
label_drop_prob = 0.1
sample_preset = "cond64"
decoder_noise_scale = 1.0
warmup_steps = 5000
max_steps = 39_900  # 100 epochs of 204,045 documents at batch 512
grad_ckpt = True  # 1088 tokens x 512 rows: recompute blocks in backward
eval_interval = 2000
ckpt_interval = 2000
