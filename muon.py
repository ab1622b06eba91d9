"""Muon, written for ELF (METHOD.md, "Optimiser and schedule"): orthogonalised momentum for 2-D
weight matrices, a NAdam-like Adam for every other parameter, in one torch.optim.Optimizer.

Which parameters it is for. Muon is an optimiser for *matrices*: the update of a weight
W (fan_out x fan_in) is its Nesterov momentum with every singular value pushed to ~1
(Newton–Schulz), so each step moves W by the same amount in every direction it moves at
all. Vectors (biases, norm scales) and the learned prefix tokens (1, 4, H) have no such
structure and take the Adam update. Which 2-D weights go to Muon is a choice:
  - "all"    (the ELF authors, the default): every 2-D weight, the vocabulary projection,
             the input projections and the time-embedding MLPs included;
  - "blocks" (the Muon reference's advice): only the transformer blocks' matrices; the
             input projections, time embeddings and both heads go to Adam.

The two updates, at step k = 1, 2, ... (as released; no weight decay anywhere):
  Muon   m <- b m + (1 - b) g,  b = 0.95
         u  = b m / (1 - b^(k+1)) + (1 - b) g / (1 - b^k)          (Nesterov, bias-corrected)
         W <- W - lr * sqrt(max(1, fan_out / fan_in)) * NS5(u / |u|_F)
  Adam   m <- b1 m + (1 - b1) g,  v <- b2 v + (1 - b2) g^2,  b1, b2 = 0.9, 0.999
         m_hat = b1 m / (1 - b1^(k+1)) + (1 - b1) g / (1 - b1^k),  v_hat = v / (1 - b2^k)
         p <- p - lr * m_hat / (sqrt(v_hat) + 1e-8)
Both kinds use the same lr (train.py: blr * global_batch / 256, warmed up).

Under DDP (torch.distributed initialised) the gradients are already averaged,
so every rank holds the same momenta; the Newton–Schulz work, the only costly part, is
split: each rank orthogonalises its share of the matrices (balanced by cost), and one
all_gather hands every rank every update. The optimiser state stays identical on all
ranks, so rank 0's checkpoint resumes on any number of ranks.

Usage:
    opt = Muon(muon_param_groups(model, "all"), lr=2e-3)
    loss.backward(); opt.step()
"""

import torch
import torch.distributed as dist

NS_COEFFS = (3.4445, -4.7750, 2.0315)  # quintic: steep at 0, so 5 steps lift small singular values


def newton_schulz(G: torch.Tensor, steps: int = 5, eps: float = 1e-8) -> torch.Tensor:
    """Approximately orthogonalise a matrix, or a batch (n, rows, cols) of same-shaped ones:
    U V^T of its SVD, with the singular values landing in a band around 1 rather than exactly
    on 1 (the coefficients trade exactness for speed). Computed in float32 on the
    Frobenius-normalised matrix. With r <= n its two sides, each step costs 2 products with
    the r x n matrix; on a CPU, one more than twice as long as wide iterates on its r x r
    Gram matrix instead."""
    X = G.float()
    # all singular values <= 1: inside the basin
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + eps)
    r, n = sorted(X.shape[-2:])
    tall = X.shape[-2] > X.shape[-1]
    # not on CUDA: TF32 matmuls' rounding would grow in the recursion
    if n > 2 * r and X.device.type == "cpu":
        X = gram_newton_schulz(X if tall else X.mT, steps)
        return X if tall else X.mT
    # on the wide side: the Gram matrix is smaller
    X = plain_newton_schulz(X.mT if tall else X, steps)
    return X.mT if tall else X


def plain_newton_schulz(X, steps):
    """The iteration as released, on a wide X (r x n)."""
    a, b, c = NS_COEFFS
    for _ in range(steps):
        A = X @ X.mT  # (r, r)
        B = _mm(A, A, A, beta=b, alpha=c)  # b A + c A^2, one fused kernel
        # p(X) = a X + b X^3 + c X^5 on the singular values
        X = _mm(X, B, X, beta=a)  # a X + B X
    return X


def gram_newton_schulz(X, steps):
    """The same iteration carried on r x r matrices. On a tall X (n x r) a step is X <- X S,
    S = a I + b R + c R^2 a polynomial of the Gram matrix R = X^T X; so after k steps
    X_k = X_0 P with P = S_1 ... S_k, and R follows R <- S R S (S and R commute). The long
    matrix is touched only to form R and to apply P: 8 r^2 n + 28 r^3 FLOPs for 5 steps
    instead of 20 r^2 n + 10 r^3 (fewer from n = 1.5 r; the 30522 x 384 vocabulary
    projection: 37.6 GFLOP instead of 90.6). Kept tall because `tall @ small` products ran
    faster than `small @ wide` ones on the CPUs measured (results/bench/README.md). Float32
    round-off accumulates in the recursion for R (30-200x the plain iteration's error on
    gradient-like matrices), so halfway R is formed again from X; the result then agrees
    with a float64 iteration about as closely as the plain one does."""
    a, b, c = NS_COEFFS
    restart = (steps + 1) // 2
    R, P = X.mT @ X, None  # (r, r)
    for k in range(steps):
        if k == restart:  # fold P into X, form R afresh
            X, P = X @ P, None
            R = X.mT @ X
        S = _mm(R, R, R, beta=b, alpha=c)  # b R + c R^2
        S.diagonal(dim1=-2, dim2=-1).add_(a)  # + a I
        P = S if P is None else P @ S
        if k + 1 not in (restart, steps):  # the next step's R (formed afresh at the restart)
            R = S @ R @ S
    return X if P is None else X @ P


def _mm(input, m1, m2, beta=1.0, alpha=1.0):
    """beta input + alpha m1 m2 in one kernel, for single matrices or batches."""
    mm = torch.baddbmm if input.dim() == 3 else torch.addmm
    return mm(input, m1, m2, beta=beta, alpha=alpha)


def orthogonal_update(u: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """NS(u) scaled by sqrt(max(1, fan_out / fan_in)) for a weight stored (fan_out, fan_in):
    the update's RMS then does not shrink for tall matrices."""
    fan_out, fan_in = u.shape[-2:]
    return newton_schulz(u, steps) * max(1.0, fan_out / fan_in) ** 0.5


def orthogonal_updates(items):
    """[(u, ns_steps)] -> [update], same-shaped matrices orthogonalised together as one batch
    (one kernel per iteration instead of one per matrix: the blocks' matrices repeat)."""
    groups = {}
    for i, (u, n) in enumerate(items):
        groups.setdefault((tuple(u.shape), n), []).append(i)
    out = [None] * len(items)
    for (_, n), idx in groups.items():
        batch = (
            orthogonal_update(torch.stack([items[i][0] for i in idx]), n)
            if len(idx) > 1
            else orthogonal_update(items[idx[0]][0], n)[None]
        )
        for i, upd in zip(idx, batch):
            out[i] = upd
    return out


def assign_owners(shapes, world: int):
    """Rank that orthogonalises each matrix: greedy by Newton–Schulz cost (min^2 * max),
    largest first, to the least-loaded rank. Deterministic, so every rank agrees."""
    cost = [min(s) ** 2 * max(s) for s in shapes]
    load, owner = [0] * world, [0] * len(shapes)
    for i in sorted(range(len(shapes)), key=lambda i: (-cost[i], i)):
        r = min(range(world), key=lambda r: (load[r], r))
        owner[i], load[r] = r, load[r] + cost[i]
    return owner


def muon_param_groups(model: torch.nn.Module, which: str = "all"):
    """Split a model's trainable parameters into [Muon group, Adam group] (see the docstring)."""
    if which not in ("all", "blocks"):
        raise ValueError(f"muon_params must be 'all' or 'blocks', got '{which}'")
    muon, adam = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        # 'blocks': the transformer blocks' matrices, a second network's too (separate_decoder)
        blocks = name.startswith("blocks.") or ".blocks." in name
        matrix = p.ndim == 2 and (which == "all" or blocks)
        (muon if matrix else adam).append(p)
    return [{"params": muon, "use_muon": True}, {"params": adam, "use_muon": False}]


class Muon(torch.optim.Optimizer):
    """Muon for groups with use_muon=True (2-D weights), NAdam-like Adam for the others."""

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        momentum: float = 0.95,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        ns_steps: int = 5,
    ):
        defaults = dict(
            lr=lr, momentum=momentum, betas=betas, eps=eps, ns_steps=ns_steps, use_muon=False
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            bad = [tuple(p.shape) for p in group["params"] if group["use_muon"] and p.ndim != 2]
            if bad:
                raise ValueError(f"Muon takes 2-D weight matrices only, got shapes {bad}")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else closure()
        work = []  # (param, u, lr, ns_steps) for Muon
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g, state = p.grad.float(), self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p, dtype=torch.float32)
                    if not group["use_muon"]:
                        state["v"] = torch.zeros_like(p, dtype=torch.float32)
                state["step"] += 1
                k = state["step"]
                if group["use_muon"]:
                    b = group["momentum"]
                    state["m"].lerp_(g, 1 - b)  # m <- b m + (1 - b) g
                    u = state["m"] * (b / (1 - b ** (k + 1))) + g * ((1 - b) / (1 - b**k))
                    work.append((p, u, group["lr"], group["ns_steps"]))
                else:
                    b1, b2 = group["betas"]
                    state["m"].lerp_(g, 1 - b1)
                    state["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                    m_hat = state["m"] * (b1 / (1 - b1 ** (k + 1))) + g * ((1 - b1) / (1 - b1**k))
                    denom = (state["v"] / (1 - b2**k)).sqrt_().add_(group["eps"])
                    p.add_((m_hat / denom).to(p.dtype), alpha=-group["lr"])
        updates = self._orthogonalise([(u, n) for _, u, _, n in work])
        for (p, _, lr, _), upd in zip(work, updates):
            p.add_(upd.to(p.dtype), alpha=-lr)
        return loss

    def _orthogonalise(self, items):
        """[(u, ns_steps)] -> [update]; split across ranks and all-gathered under DDP (also
        with one rank, where the gather is a copy: a one-GPU torchrun exercises the path)."""
        if not (dist.is_available() and dist.is_initialized()) or not items:
            return orthogonal_updates(items)
        rank, world = dist.get_rank(), dist.get_world_size()
        owner = assign_owners([u.shape for u, _ in items], world)
        sizes = [sum(u.numel() for (u, _), o in zip(items, owner) if o == r) for r in range(world)]
        buf = items[0][0].new_zeros(max(sizes))  # this rank's updates, flat, padded
        mine = [
            upd.flatten()
            for upd in orthogonal_updates([it for it, o in zip(items, owner) if o == rank])
        ]
        if mine:
            buf[: sizes[rank]] = torch.cat(mine)
        gathered = [torch.empty_like(buf) for _ in range(world)]
        dist.all_gather(gathered, buf)  # one collective for all matrices
        out, offset = [], [0] * world
        for (u, _), o in zip(items, owner):
            out.append(gathered[o][offset[o] : offset[o] + u.numel()].view_as(u))
            offset[o] += u.numel()
        return out
