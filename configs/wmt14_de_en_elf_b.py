# ELF-B on WMT14 German -> English (ELF_SPEC §6, §7) [release settings]; paper: BLEU 26.4.
# Needs a network (hub data and t5-small) and GPUs:
#   torchrun --nproc_per_node=8 train.py configs/wmt14_de_en_elf_b.py
#   python evaluate.py --ckpt out/wmt14_de_en_elf_b --n 3003 --out_dir eval/wmt14   # newstest2014 BLEU
out_dir = "out/wmt14_de_en_elf_b"
dataset = "wmt/wmt14"                 # 4.5M pairs; 'translation' column of {'de', 'en'} dicts
dataset_config = "de-en"
source_column = "translation.de"
target_column = "translation.en"
val_split = "test"                    # newstest2014, the split the paper reports
encoder = "t5-small"
latent_mean = 0.0                     # released T5-small statistics
latent_std = 0.2
model = "ELF-B"
max_length = 128                      # [source <= 64 ; target], padded with EOS
max_input_length = 64
max_seq_len = 128
label_drop_prob = 0.1                 # for CFG (sampled with CFG 2: the cond64 preset)
decoder_noise_scale = 1.0             # conditional decode branch [release]
optimizer = "muon"
batch_size = 512                      # lr = blr * 512 / 256 = 2e-3
blr = 1e-3
warmup_steps = 5000
max_steps = 880_600                   # 100 epochs of 4,508,785 pairs at batch 512
ema_decay = 0.9999
eval_interval = 5000
ckpt_interval = 5000
