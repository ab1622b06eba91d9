"""The error decomposition: does a checkpoint's error come from its decoder or from its flow?

Each figure isolates one half of ELF (METHOD.md, "Evaluation"), measured on real held-out rows
of the checkpoint's own data:

- **decoder**: decode mode applied to the *clean* latents of real text (`dec_acc`), beside a
  nearest-neighbour lookup of each position's latent among training latents (`nn_acc`, by
  cosine): how decodable the latents are at all, without any training of a decoder; and the
  decoder's accuracy on the tokens training shows and on those it never shows (`acc_text_seen`,
  `acc_text_unseen`, `unseen_text` their share): a decoder learns no token it never saw, so on a
  small data set 1 - unseen_text bounds it;
- **flow**: real latents noised to t0 (0.9, 0.7, 0.5) and integrated back to t = 1 by the
  run's sampler on the part of its time grid above t0, then decoded (`round_trip`: token
  accuracy and repetition); how alike neighbouring positions' x_hat are at each step of a
  sampling trajectory from noise (`adjacent_cosine`) beside real latents'; how near the
  sampled end points lie to a real latent (`end_nn_cosine`) beside held-out latents';
- **SC-CFG**: whether its scale w moves x_hat at all: ||x_hat(w) - x_hat(1)|| / ||x_hat(1)|| at
  each step of an Euler ODE under w, and the share of decoded tokens that w changes against the
  ODE at w = 1 from the same noise (`sc_cfg`; w is the preset's, or 3 where the preset's is 1);
- a picture of one trajectory: the tokens decoded from x_hat at every step, a row per step
  (`plot_trajectory`), so that a reader sees the text form.

Accuracies are over the text tokens (framing and EOS included, padding excluded; for
conditional rows the target's) and over every position of the loss (padding EOS included).
Repetition is the yardstick's (one token over a third of a text), on the decoded text.

    report = decompose(model, encoder, val, train, flow, preset,
                       n=64)   # val, train: encoder.Latents
    plot_trajectory(report["trajectory"], "trajectory.png")
"""

import numpy as np
import torch
import torch.nn.functional as F

from conditional import batch_masks
from flow import (
    Denoiser,
    FlowConfig,
    decode_latents,
    interpolate,
    ode_step,
    sample_latents,
    time_grid,
)
from lib.metrics import repetition

ROUND_TRIP_T0 = (0.9, 0.7, 0.5)
# a conditional checkpoint's, down to near noise: where the target is mostly noise only the
# (clean) source can say what it is, so the accuracy there says how much the source is read
ROUND_TRIP_T0_COND = (0.9, 0.7, 0.5, 0.3, 0.1)
SC_CFG_PROBE = 3.0  # the SC-CFG scale measured where a preset's is 1: the release's uncond32
NN_KEYS = 100_000  # training positions searched by the nearest-neighbour lookup
# training rows read for the tokens training shows (all of a small set's)
SEEN_ROWS = 1_000_000


def accuracy(pred, tokens, mask) -> float:
    """The share of masked positions whose prediction is the token."""
    return ((pred == tokens) & mask).sum().item() / max(1, mask.sum().item())


def adjacent_cosine(x, mask=None) -> float:
    """Mean cosine similarity of neighbouring positions' vectors, x (B, L, D); mask (B, L):
    only pairs whose both positions are in it (NaN when there is none)."""
    cos = F.cosine_similarity(x[:, :-1].float(), x[:, 1:].float(), dim=-1)  # (B, L - 1)
    pair = torch.ones_like(cos, dtype=torch.bool) if mask is None else mask[:, :-1] & mask[:, 1:]
    return (cos * pair).sum().item() / pair.sum().item() if pair.any() else float("nan")


def nearest(queries, keys, key_tokens, chunk: int = 256):
    """Cosine nearest neighbour of each query (N, D) among keys (M, D) -> (tokens (N,), cosine
    (N,))."""
    k = F.normalize(keys.float(), dim=-1)
    toks, sims = [], []
    for i in range(0, len(queries), chunk):
        s = F.normalize(queries[i : i + chunk].float(), dim=-1) @ k.T  # (chunk, M)
        best, j = s.max(-1)
        toks.append(key_tokens[j])
        sims.append(best)
    return torch.cat(toks), torch.cat(sims)


def text_tokens(ids, eos_id: int, special, start: int = 0):
    """A decoded row's text as the yardstick reads it: from `start` (a conditional target's
    first position) to the first EOS, without special tokens."""
    out = []
    for i in ids[start:]:
        if i == eos_id:
            break
        if i not in special:
            out.append(i)
    return out


def text_mask(ids, eos_id: int, starts):
    """(B, L) bool: each row's text as decoded, from its start to its first EOS (included)."""
    pos = torch.arange(ids.shape[1], device=ids.device)[None, :]
    start = torch.tensor(starts, device=ids.device)[:, None]
    is_eos = (ids == eos_id) & (pos >= start)
    first = torch.where(
        is_eos.any(1), is_eos.float().argmax(1), torch.full_like(start[:, 0], ids.shape[1] - 1)
    )
    return (pos >= start) & (pos <= first[:, None])


def rows_repetition(ids, eos_id, special, starts) -> float:
    return repetition([text_tokens(r, eos_id, special, s) for r, s in zip(ids.tolist(), starts)])


def seen_tokens(latents, size: int, max_rows: int = SEEN_ROWS):
    """(size,) bool: the ids that occur in the loss positions of the first `max_rows` rows of
    `latents` (all of a small data set's training rows; ids >= size are left out)."""
    seen = torch.zeros(size, dtype=torch.bool)
    for i in range(0, min(len(latents), max_rows), 4096):
        rows = latents.rows.select(np.arange(i, min(len(latents), max_rows, i + 4096)))
        ids = rows.ids[batch_masks(rows, "cpu").loss]
        seen[ids[ids < size]] = True
    return seen


def masks(model, latents, idx, device):
    """Of rows idx: (x, tokens, text mask, loss mask, condition or None, target starts); x the
    model's clean latents (ELF.latents: the encoder's, or its learned table's)."""
    x, tokens, m = latents.batch(idx, device)
    x = model.latents(x, model.vocab_index(tokens))
    text = m.valid if m.cond is None else m.valid & ~m.cond  # the text, its framing and EOS
    starts = [0] * len(idx) if m.cond is None else m.cond.sum(1).tolist()  # the target's start
    return x, tokens, text, m.loss, m.cond, starts


@torch.no_grad()
def round_trip(
    model, x, tokens, text, loss_mask, cond, t0: float, flow: FlowConfig, preset, generator
):
    """Real latents noised to t0, integrated to 1 on the preset's grid above t0, decoded.
    Returns (ids (B, L), steps taken). A condition stays clean, as in sampling."""
    g = time_grid(preset["steps"], preset["grid"], flow, generator, x.device)
    grid = torch.cat([torch.tensor([t0], device=x.device), g[g > t0]])
    eps = torch.randn(x.shape, generator=generator, device=x.device)
    z = interpolate(x, eps, torch.full((len(x),), t0, device=x.device), flow.noise_scale)
    den = Denoiser(model, preset["sc_cfg"], preset.get("guidance", 1.0), cond, x, flow)
    z, _ = sample_latents(
        den, den.hold(z), grid, preset["sampler"], preset.get("gamma", 0.0), generator
    )
    return decode_latents(model, z, preset["sc_cfg"]), len(grid) - 1


@torch.no_grad()
def sc_cfg_shift(den_w, den_1, z, grid, mask) -> dict:
    """Does the SC-CFG scale w move x_hat at all (METHOD.md's w, fed to the network)? Along the
    Euler ODE from noise z under den_w (scale w), each step's x_hat(w) beside x_hat(1) at the
    same z, t and self-conditioning input: ||x_hat(w) - x_hat(1)|| / ||x_hat(1)|| over the
    positions of `mask`, per step; and the end points of the Euler ODE under each from the same
    z (the caller decodes them: how many tokens w changes)."""
    z0, x_sc, shift = z, torch.zeros_like(z), []
    for t, t_next in zip(grid[:-1], grid[1:]):
        z_next, x_w = ode_step(den_w, z, t, t_next, x_sc)
        x_1 = den_1(z, t, x_sc)
        shift.append(((x_w - x_1)[mask].norm() / x_1[mask].norm().clamp(min=1e-12)).item())
        z, x_sc = z_next, x_w
    return {"per_step": shift, "end_w": den_w.hold(z), "end_1": sample_latents(den_1, z0, grid)[0]}


@torch.no_grad()
def decompose(
    model,
    encoder,
    val,
    train,
    flow: FlowConfig,
    preset: dict,
    n: int = 64,
    seed: int = 0,
    t0s=ROUND_TRIP_T0,
    nn_keys: int = NN_KEYS,
    traj_rows: int = 3,
    seen_rows: int = SEEN_ROWS,
):
    """The decomposition of one checkpoint (module docstring). val, train: encoder.Latents of
    the held-out and the training rows; preset: sampler settings (sample.PRESETS). Returns a
    JSON-able dict; its "trajectory" entry holds the decoded tokens of `traj_rows` samples."""
    device = next(model.parameters()).device
    eos, special = encoder.eos_id, set(encoder.tokenizer.all_special_ids)
    idx = np.arange(min(n, len(val)))
    x, tokens, text, loss_mask, cond, starts = masks(model, val, idx, device)
    out = {"n": len(idx), "preset": preset}

    # the decoder: clean latents in, tokens out; and what a lookup of the latents gives
    ids = decode_latents(model, x, preset["sc_cfg"])
    out["decoder"] = {
        "acc_text": accuracy(ids, tokens, text),
        "acc_all": accuracy(ids, tokens, loss_mask),
    }
    # ... split by whether training ever shows the token: no decoder learns a token it never saw,
    # so 1 - unseen_text is the most a decoder taught by these training rows can reach
    seen = seen_tokens(train, int(tokens.max()) + 1, seen_rows).to(device)[tokens]  # (B, L)
    out["decoder"].update(
        acc_text_seen=accuracy(ids, tokens, text & seen),
        acc_text_unseen=accuracy(ids, tokens, text & ~seen),
        unseen_text=(text & ~seen).sum().item() / max(1, text.sum().item()),
    )
    per_row = max(1, tokens.shape[1])
    t_idx = np.arange(min(len(train), max(1, nn_keys // per_row)))
    tx, ttok, _, tloss, _, _ = masks(model, train, t_idx, device)
    keys, key_tokens = tx[tloss], ttok[tloss]  # the positions training decodes
    nn_tok, nn_cos = nearest(x.flatten(0, 1), keys, key_tokens)
    nn_tok, nn_cos = nn_tok.view(tokens.shape), nn_cos.view(tokens.shape)
    out["decoder"].update(
        nn_acc_text=accuracy(nn_tok, tokens, text),
        nn_acc_all=accuracy(nn_tok, tokens, loss_mask),
        nn_rows=len(t_idx),
    )

    # the flow, from real latents: noised to t0 and brought back
    gen = torch.Generator(device).manual_seed(seed)
    out["round_trip"] = []
    for t0 in t0s:
        rt, k = round_trip(model, x, tokens, text, loss_mask, cond, t0, flow, preset, gen)
        out["round_trip"].append(
            {
                "t0": t0,
                "steps": k,
                "acc_text": accuracy(rt, tokens, text),
                "acc_all": accuracy(rt, tokens, loss_mask),
                "repetition": rows_repetition(rt, eos, special, starts),
            }
        )
    out["real_repetition"] = rows_repetition(tokens, eos, special, starts)

    # the flow, from noise: how alike neighbouring positions are along a sampling trajectory,
    # over every position and over the text's (a sample's text: up to its first decoded EOS)
    g = time_grid(preset["steps"], preset["grid"], flow, gen, device)
    den = Denoiser(model, preset["sc_cfg"], preset.get("guidance", 1.0), cond, x, flow)
    z = den.hold(flow.noise_scale * torch.randn(x.shape, generator=gen, device=device))
    z, xs = sample_latents(
        den, z, g, preset["sampler"], preset.get("gamma", 0.0), gen, trajectory=True
    )
    final = decode_latents(model, z, preset["sc_cfg"])
    sample_text = text_mask(final, eos, starts)
    generated = loss_mask if cond is None else ~cond  # conditional: target pairs only
    steps = [adjacent_cosine(xh, generated) for xh in xs]
    steps_text = [adjacent_cosine(xh, sample_text) for xh in xs]
    out["adjacent_cosine"] = {
        "real": adjacent_cosine(x, generated),
        "real_text": adjacent_cosine(x, text),
        "first_step": steps[0],
        "last_step": steps[-1],
        "first_step_text": steps_text[0],
        "last_step_text": steps_text[-1],
        "per_step": steps,
        "per_step_text": steps_text,
        "times": g[:-1].tolist(),
    }
    # ... and how near the end points lie to a training latent, beside real held-out latents
    out["end_nn_cosine"] = {
        "samples": nearest(z[generated], keys, key_tokens)[1].mean().item(),
        "real": nn_cos[loss_mask].mean().item(),
    }
    # SC-CFG: does its scale move x_hat? (the preset's w; the release's 3 where the preset's is 1)
    w = preset["sc_cfg"] if preset["sc_cfg"] != 1 else SC_CFG_PROBE
    guidance = preset.get("guidance", 1.0)
    den_w, den_1 = (Denoiser(model, s, guidance, cond, x, flow) for s in (w, 1.0))
    z = den_w.hold(flow.noise_scale * torch.randn(x.shape, generator=gen, device=device))
    sc = sc_cfg_shift(den_w, den_1, z, g, generated)
    ends = [decode_latents(model, sc[e], s) for e, s in (("end_w", w), ("end_1", 1.0))]
    out["sc_cfg"] = {
        "w": w,
        "shift_per_step": sc["per_step"],
        "shift_mean": float(np.mean(sc["per_step"])),
        "tokens_changed": (ends[0] != ends[1])[generated].float().mean().item(),
        "times": g[:-1].tolist(),
    }
    k = min(traj_rows, len(idx))
    decoded = [decode_latents(model, xh[:k], preset["sc_cfg"]).cpu() for xh in xs]
    final = final[:k].cpu()
    piece = lambda i: encoder.tokenizer.convert_ids_to_tokens([int(i)])[0]
    # x_hat is taken at each step's start
    out["trajectory"] = {
        "times": g[:-1].tolist(),
        "rows": [
            {
                "start": starts[j],
                "steps": [[piece(i) for i in d[j].tolist()] for d in decoded],
                "final": [piece(i) for i in final[j].tolist()],
                "text": encoder.detokenize(final[j, starts[j] :]),
            }
            for j in range(k)
        ],
    }
    return out


def summary(d) -> dict:
    """The decomposition's headline figures as flat keys (for tables: tools/ablation.py)."""
    s = {
        "dec_acc": d["decoder"]["acc_text"],
        "nn_acc": d["decoder"]["nn_acc_text"],
        "dec_acc_seen": d["decoder"]["acc_text_seen"],
        "adj_cos_first": d["adjacent_cosine"]["first_step_text"],
        "adj_cos_real": d["adjacent_cosine"]["real_text"],
        "end_nn_cos": d["end_nn_cosine"]["samples"],
    }
    for r in d["round_trip"]:
        s[f"rt_acc_{r['t0']:g}"], s[f"rt_rep_{r['t0']:g}"] = r["acc_text"], r["repetition"]
    if "sc_cfg" in d:
        s["sc_cfg_shift"] = d["sc_cfg"]["shift_mean"]
        s["sc_cfg_tokens"] = d["sc_cfg"]["tokens_changed"]
    return s


def markdown(d) -> list:
    """The decomposition as report.md lines."""
    dec, adj, end = d["decoder"], d["adjacent_cosine"], d["end_nn_cosine"]
    p = d["preset"]
    lines = [
        f"## Where the error comes from ({d['n']} held-out rows; sampler {p['sampler']}, "
        f"{p['steps']} steps, {p['grid']} grid, SC-CFG {p['sc_cfg']:g})",
        "",
        "| | text tokens | all loss positions |",
        "|---|---|---|",
        f"| decoder on clean latents | {dec['acc_text']:.3f} | {dec['acc_all']:.3f} |",
        f"| nearest training latent (cosine, {dec['nn_rows']} rows) | "
        f"{dec['nn_acc_text']:.3f} | {dec['nn_acc_all']:.3f} |",
    ]
    if "acc_text_seen" in dec:
        lines += [
            f"| decoder on tokens training shows / never shows "
            f"({dec['unseen_text']:.1%} of the text) | "
            f"{dec['acc_text_seen']:.3f} / {dec['acc_text_unseen']:.3f} | |"
        ]
    lines += [
        f"| round trip from t0 = {r['t0']:g} ({r['steps']} steps): accuracy, "
        f"repetition {r['repetition']:.2f} | {r['acc_text']:.3f} | {r['acc_all']:.3f} |"
        for r in d["round_trip"]
    ]
    lines += [
        "",
        f"Real text's repetition: {d['real_repetition']:.2f}.",
        "",
        "| neighbouring positions' cosine | text positions | all positions |",
        "|---|---|---|",
        f"| real latents | {adj['real_text']:.3f} | {adj['real']:.3f} |",
        f"| x_hat at the first sampling step | {adj['first_step_text']:.3f} | "
        f"{adj['first_step']:.3f} |",
        f"| x_hat at the last sampling step | {adj['last_step_text']:.3f} | "
        f"{adj['last_step']:.3f} |",
        "",
        f"Cosine to the nearest training latent: sampled end points {end['samples']:.3f}, "
        f"real held-out latents {end['real']:.3f}.",
    ]
    if "sc_cfg" in d:
        sc = d["sc_cfg"]
        lines += [
            "",
            f"SC-CFG at w = {sc['w']:g} against w = 1, Euler ODE from the same noise: "
            f"||x_hat(w) - x_hat(1)|| / ||x_hat(1)|| {sc['shift_mean']:.4f} on average over the "
            f"steps (first {sc['shift_per_step'][0]:.4f}, last {sc['shift_per_step'][-1]:.4f}); "
            f"{sc['tokens_changed']:.1%} of the decoded tokens differ.",
        ]
    return lines


def plot_trajectory(traj, path: str, max_positions: int = 32):
    """A PNG of sampling trajectories: per sample a grid, one row per step (time on the left),
    one column per position, each cell the word piece decoded from that step's x_hat; green
    where it is already the final token."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = traj["rows"]
    n_steps = len(traj["times"])
    L = min(max_positions, len(rows[0]["final"]) - min(r["start"] for r in rows))
    fig, axes = plt.subplots(
        len(rows),
        1,
        figsize=(0.75 * L + 1, (0.16 * (n_steps + 1) + 0.5) * len(rows)),
        squeeze=False,
    )
    for ax, r in zip(axes[:, 0], rows):
        s = r["start"]
        grid = [st[s : s + L] for st in r["steps"]] + [r["final"][s : s + L]]
        final = r["final"][s : s + L]
        colours = np.array(
            [
                [[0.75, 0.92, 0.75] if tok == f else [1, 1, 1] for tok, f in zip(line, final)]
                for line in grid
            ]
        )
        ax.imshow(colours, aspect="auto", interpolation="nearest")
        for i, line in enumerate(grid):
            for j, tok in enumerate(line):
                ax.text(j, i, tok, ha="center", va="center", fontsize=5, family="monospace")
        labels = [f"{t:.3f}" for t in traj["times"]] + ["decoded"]
        ax.set_yticks(range(len(labels)), labels, fontsize=5)
        ax.set_xticks(range(L), [str(s + j) for j in range(L)], fontsize=5)
        ax.set_title(r["text"][:120], fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
