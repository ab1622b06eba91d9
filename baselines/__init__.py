"""What the paper compares ELF with, on ELF's data and tokenizer at equal compute: masked
diffusion (mdlm) and an autoregressive GPT-2 (ar), which also fits the offline judge."""
