# ELF-B on WMT14 German -> English (METHOD.md, "Conditional generation") [release settings:
# TrainConfig's defaults where this file is silent]; paper: BLEU 26.4.
# Needs a network (hub data and t5-small) and GPUs:
#   torchrun --nproc_per_node=8 train.py configs/wmt14_de_en_elf_b.py
#   python evaluate.py --ckpt out/wmt14_de_en_elf_b --n 3003 \
#       --out_dir eval/wmt14   # newstest2014 BLEU
out_dir = "out/wmt14_de_en_elf_b"
dataset = "wmt/wmt14"  # 4.5M pairs; 'translation' column of {'de', 'en'} dicts
dataset_config = "de-en"
source_column = "translation.de"
target_column = "translation.en"
val_split = "test"  # newstest2014, the split the paper reports
max_length = 128  # [source <= 64 ; target], padded with EOS
max_input_length = 64
label_drop_prob = 0.1  # for CFG (sampled with CFG 2: the cond64 preset)
sample_preset = "cond64"
decoder_noise_scale = 1.0  # conditional decode branch [release]
warmup_steps = 5000
max_steps = 880_600  # 100 epochs of 4,508,785 pairs at batch 512
eval_interval = 5000
ckpt_interval = 5000
