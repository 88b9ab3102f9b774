"""A hand-built model that solves the task with exactly the paper's circuit: the reference
point of every analysis (each progress measure is 1 on it), and the tests' ground truth
(docs/analysis.md, "The reference circuit").

    model = reference_model(task)                     # AssignAddTransformer, exact circuit
    model = reference_model(task, shuffle_qk2=True)   # layer 2 matches u with v != u
    model = reference_model(task, shuffle_qk1=True)   # numbers attend to position 0
    model = reference_model(task, rotation_seed=0)    # the same circuit in a random basis

The residual stream has orthogonal one-hot blocks: token ids, positions, "bound variable"
B_u (K), operand value (p) and answer (p). Layer 1 is positional (a number at t attends to
t-1, `=` to L-3 and L-2 equally; its OV maps variable u to B_u). Layer 2's query `=` scores
the operand positions P and a number bound to an operand variable 0.5 * G = P, variables and
`=` -penalty; its OV maps number n to value_gain * e_val[n]. The MLP is a bias-free lookup
table of unordered pairs writing e_ans[(i + j) mod p].
"""

from __future__ import annotations

import math

import torch

from empirical.model.config import ModelConfig
from empirical.model.transformer import AssignAddTransformer
from empirical.task.config import TaskConfig
from empirical.task.registry import family_of


def reference_layout(task: TaskConfig) -> dict[str, int]:
    V = task.p + task.K + 3
    tok, pos = 0, V
    bound = pos + task.L
    val = bound + task.K
    ans = val + task.p
    return {"tok": tok, "pos": pos, "bound": bound, "val": val, "ans": ans, "d": ans + task.p}


@torch.no_grad()
def reference_model(
    task: TaskConfig,
    shuffle_qk1: bool = False,
    shuffle_qk2: bool = False,
    A: float = 30.0,
    P: float = 20.0,
    G: float = 40.0,
    penalty: float = 100.0,
    value_gain: float = 5.0,
    rotation_seed: int | None = None,
) -> AssignAddTransformer:
    p, K, L = task.p, task.K, task.L
    vocab = family_of(task).vocabulary(task)
    lay = reference_layout(task)
    d = lay["d"]
    pairs = [(i, j) for i in range(p) for j in range(i, p)]
    cfg = ModelConfig.for_task(p, K, L, d_model=d, d_mlp=len(pairs), dtype="float64")
    model = AssignAddTransformer(cfg, seed=0)
    for param in model.parameters():
        param.zero_()
    scale = math.sqrt(cfg.d_head_)
    eye = torch.eye(d, dtype=torch.float64)
    pos = lay["pos"]

    def set_head(layer: int, M: torch.Tensor, O: torch.Tensor) -> None:
        """Layer `layer`'s head: scores x M y^T (W_Q = I, W_K = scale M^T), W_V = I, W_O = O."""
        attn = model.blocks[layer].attn
        attn.W_Q[0].copy_(eye)
        attn.W_K[0].copy_(scale * M.T)
        attn.W_V[0].copy_(eye)
        attn.W_O[0].copy_(O)

    model.W_E.copy_(eye[: p + K + 3])
    model.W_pos.copy_(eye[pos : pos + L])

    # layer 1: positional previous-token head, `=` -> operand positions
    M1 = torch.zeros(d, d, dtype=torch.float64)
    for t in range(1, L - 4):
        M1[pos + t, pos + (0 if shuffle_qk1 else t - 1)] = A
    for t in (0, L - 4, L - 3, L - 2):
        M1[pos + t, pos + t] = A
    M1[pos + L - 1, pos + L - 3] = A
    M1[pos + L - 1, pos + L - 2] = A
    O1 = torch.zeros(d, d, dtype=torch.float64)
    for u in range(K):
        O1[p + u, lay["bound"] + u] = 1.0
    set_head(0, M1, O1)

    # layer 2: `=` -> operand positions and numbers bound to the operand variables
    M2 = torch.zeros(d, d, dtype=torch.float64)
    M2[pos + L - 1, pos + L - 3] = P
    M2[pos + L - 1, pos + L - 2] = P
    perm = [(u + 1) % K for u in range(K)] if shuffle_qk2 else list(range(K))
    for u in range(K):
        M2[lay["bound"] + u, lay["bound"] + perm[u]] = G
        M2[pos + L - 1, p + u] = -penalty
    M2[pos + L - 1, vocab.eq] = -penalty
    O2 = torch.zeros(d, d, dtype=torch.float64)
    for n in range(p):
        O2[n, lay["val"] + n] = value_gain
    set_head(1, M2, O2)

    # layer-2 MLP: lookup table of unordered pairs
    for c, (i, j) in enumerate(pairs):
        col = torch.full((p,), -1.0, dtype=torch.float64)
        col[i] = col[j] = 1.0
        model.W_in[lay["val"] : lay["val"] + p, c] = col
        model.W_out[c, lay["ans"] + (i + j) % p] = 2.0 if i == j else 1.0
    model.W_U[lay["ans"] : lay["ans"] + p].copy_(torch.eye(p, dtype=torch.float64))
    if rotation_seed is not None:
        rotate_residual(model, rotation_seed)
    return model


@torch.no_grad()
def rotate_residual(model, seed: int = 0) -> None:
    """Express `model`'s residual stream in a random orthonormal basis R, in place: the
    writers W_E, W_pos, W_O and W_out are multiplied by R on the right, the readers W_Q,
    W_K, W_V, W_in and W_U by R^T on the left. Without LayerNorm or biases the function is
    unchanged."""
    d = model.cfg.d_model
    gen = torch.Generator().manual_seed(seed)
    R, _ = torch.linalg.qr(torch.randn(d, d, dtype=torch.float64, generator=gen))
    R = R.to(dtype=model.W_E.dtype, device=model.W_E.device)
    model.W_E.copy_(model.W_E @ R)
    model.W_pos.copy_(model.W_pos @ R)
    for block in model.blocks:
        attn = block.attn
        for W in (attn.W_Q, attn.W_K, attn.W_V):
            W.copy_(R.T @ W)
        attn.W_O.copy_(attn.W_O @ R)
    model.W_in.copy_(R.T @ model.W_in)
    model.W_out.copy_(model.W_out @ R)
    model.W_U.copy_(R.T @ model.W_U)
