"""MAUVE of a sample set against real held-out text (METHOD.md, "Evaluation"): how far the
samples' distribution is from real text's, read in a sentence encoder's feature space, where
quality and diversity both count (a set of one repeated text is far from real text, however
good the text).

Features (`FEATURES`): the bundled all-MiniLM-L6-v2 (encoder.py's FrozenEncoder 'minilm',
pretrained, last layer), mean-pooled over each text's non-padding positions ([CLS] and [SEP]
included) and L2-normalised: the model's own sentence embedding. MAUVE itself is the `mauve`
package's (PCA to 90% of the variance, k-means into buckets, the divergence curve's area, scaling
factor 5), with num_buckets = max(2, min(|P|, |Q|) / 10), the package's own rule.

    enc = FrozenEncoder("minilm")
    score = mauve_of(features(enc, samples), features(enc, real))      # 1: indistinguishable
"""

import numpy as np
import torch

FEATURES = "all-MiniLM-L6-v2 last layer, mean over non-padding tokens, L2-normalised"


@torch.no_grad()
def features(encoder, texts, batch_size: int = 64) -> np.ndarray:
    """(N, D) float32 sentence features of texts (FEATURES) from a FrozenEncoder."""
    out = []
    for i in range(0, len(texts), batch_size):
        batch = encoder.tokenizer(
            list(texts[i : i + batch_size]), padding=True, truncation=True, return_tensors="pt"
        ).to(encoder.device)
        h = encoder.model(**batch).last_hidden_state.float()  # (B, L, D)
        mask = batch["attention_mask"].unsqueeze(-1).float()  # (B, L, 1)
        pooled = (h * mask).sum(1) / mask.sum(1).clamp(min=1)  # (B, D)
        out.append(torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, encoder.dim), np.float32)


def mauve_of(p_features, q_features, seed: int = 25) -> float:
    """MAUVE (0-1, 1: the two sets indistinguishable) of feature sets P and Q."""
    import mauve

    buckets = max(2, round(min(len(p_features), len(q_features)) / 10))
    return float(
        mauve.compute_mauve(
            p_features=p_features,
            q_features=q_features,
            num_buckets=buckets,
            seed=seed,
            verbose=False,
        ).mauve
    )
