"""Every piece of Theorem C.1's model as an explicit matrix, and the exact population gradient
of the loss with respect to each piece (issue 36, item 1).

The simulator (`model.py`, `fast.py`) takes layer 1 and the embeddings as given: its inputs
are the augmented inputs of eq. (1). Here every piece is a float64 matrix on one residual
space, the layout docs/theorem_model.md gives the transformer that writes the theorem's model:
the theorem's basis (`Basis` order, `dim` labels), W_OV's fresh images of the basis (`dim`),
and F's outputs (`p`), R = 2 dim + p coordinates. Row vectors, as the transformer:

    x0_t = tok[z_t] + pos[t]                                   token and position embeddings
    x1_t = x0_t + sum_s A_ts x0_s ov1,  A_t = softmax_s(x0_t qk1 x0_s^T)    layer 1
    h    = sum_t sigma_t x1_t ov2,      sigma = softmax_t(x1_T qk2 x1_t^T)  layer 2, query T
    r    = x1_T + h,   logits = (r + (r w_in)^2 w_out) w_u                  MLP, unembedding

(layer 1's softmax runs over the keys `allowed` marks: all of them by default; positions are
the theorem's, t = 0..L-1). At the theorem's start (`theorem_pieces`): tok and pos are the
basis vectors; qk1 routes by position only (`routing_scale` on the routed keys: an assigned
number attends to itself and its variable, the query to its two operands, every other
position to the `+`), so A is 1/2, 1/2 or 1 up to a leak of e^-routing_scale; ov1 sends
e_{v_u} to 2 ebar_u and everything else to 0, so x1 is eq. (1)'s augmented input; qk2 is W^0
in the basis block; ov2 sends basis vector i to fresh vector dim + i; w_in, w_out are F as a
quadratic MLP (`fourier_mlp_weights`) reading the fresh images of the numbers, w_u = xi on F's
outputs. So the logits are the simulator's xi F(h) (tested).

`piece_gradients` is the gradient of the population loss with respect to every piece, by
autograd over the whole population chunk by chunk (`gradient.weighted_expectation`), for the
cross-entropy or the first-order loss (mean_y logits_y - logits_{y*}) / xi, whose negative
gradient is each piece's G1: `piece_g1(...)["qk2"][:dim, :dim]` is `gradient.g1`.

What the first-order gradients are at W^0 (derived in theory/piece_closed_form.py, tested in
theory/test_piece_closed_form.py):
the layer-1 score matrix gets exactly 0 (layer 1 changes the loss only through the ebar it
writes, and W^0 reads no ebar), and no piece but qk2 gets a gradient in a direction that
depends on which variable is queried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from .basis import Basis
from .config import SimConfig
from .gradient import Kind, cross_entropy_terms, first_order_terms, mixture, weighted_expectation
from .model import fourier_mlp_weights, initial_W
from .population import DEFAULT_CHUNK, iter_compact

PIECES = ("tok", "pos", "qk1", "ov1", "qk2", "ov2", "w_in", "w_out", "w_u")
# the dynamics ladder's releases (docs/ladder.md) as pieces
RELEASE_PIECES = {
    "layer1": ("qk1", "ov1"),
    "embeddings": ("tok", "pos"),
    "qk": ("qk2",),
    "ov": ("ov2",),
    "mlp": ("w_in", "w_out", "w_u"),
}
LOSSES = ("first_order", "ce")
DEFAULT_ROUTING_SCALE = 40.0


@dataclass
class Pieces:
    """The model's pieces (module docstring); R = 2 dim + p residual coordinates, n_tok =
    p + K + 3 token rows in the basis' token order (n, v, =, +, pad)."""

    tok: Tensor  # [n_tok, R]
    pos: Tensor  # [L, R]
    qk1: Tensor  # [R, R]
    ov1: Tensor  # [R, R]
    qk2: Tensor  # [R, R]
    ov2: Tensor  # [R, R]
    w_in: Tensor  # [R, 4p]
    w_out: Tensor  # [4p, R]
    w_u: Tensor  # [R, p]

    def as_dict(self) -> dict[str, Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def replace(self, **changes: Tensor) -> Pieces:
        return Pieces(**{**self.as_dict(), **changes})

    def flat(self) -> Tensor:
        return torch.cat([t.reshape(-1) for t in self.as_dict().values()])

    def unflat(self, vector: Tensor) -> Pieces:
        """Pieces of this one's shapes read from a flat vector (views into it)."""
        out, start = {}, 0
        for name, t in self.as_dict().items():
            out[name] = vector[start : start + t.numel()].view(t.shape)
            start += t.numel()
        return Pieces(**out)


def residual_labels(cfg: SimConfig) -> list[str]:
    """Labels of the R residual coordinates: the basis, `ov:` + each basis label (W_OV's
    fresh images), `F:y` (F's outputs)."""
    labels = Basis.from_config(cfg).labels
    return [*labels, *(f"ov:{x}" for x in labels), *(f"F:{y}" for y in range(cfg.p))]


def token_labels(cfg: SimConfig) -> list[str]:
    """Labels of tok's rows (the basis' token labels, in basis order)."""
    return Basis.from_config(cfg).labels[: cfg.p + cfg.K + 3]


def routing(cfg: SimConfig) -> list[list[int]]:
    """targets[t]: the theorem positions layer 1 routes position t to: an assigned number
    (2j+1, j < K) to its variable and itself, the query to the operands, the rest to `+`."""
    out = []
    for t in range(cfg.L):
        if t < 2 * cfg.K and t % 2 == 1:
            out.append([t - 1, t])
        elif t == cfg.T:
            out.append(list(cfg.operand_pos))
        else:
            out.append([cfg.plus_pos])
    return out


def theorem_pieces(
    cfg: SimConfig, xi: float, routing_scale: float = DEFAULT_ROUTING_SCALE,
    W: Tensor | None = None,
) -> Pieces:  # fmt: skip
    """The theorem's model at its start (module docstring); `W` ([dim, dim]) replaces W^0."""
    b = Basis.from_config(cfg)
    dim, p = b.dim, cfg.p
    R = 2 * dim + p
    z = lambda *s: torch.zeros(s, dtype=torch.float64)  # noqa: E731
    tok, pos = z(p + cfg.K + 3, R), z(cfg.L, R)
    tok[:, : p + cfg.K + 3] = torch.eye(p + cfg.K + 3, dtype=torch.float64)
    for t in range(cfg.L):
        pos[t, b.pos(t)] = 1.0
    qk1, ov1 = z(R, R), z(R, R)
    for t, keys in enumerate(routing(cfg)):
        for s in keys:
            qk1[b.pos(t), b.pos(s)] = routing_scale
    for u in range(cfg.K):
        ov1[b.v(u), b.bar_v(u)] = 2.0
    qk2 = z(R, R)
    qk2[:dim, :dim] = initial_W(cfg) if W is None else W
    ov2 = z(R, R)
    ov2[:dim, dim : 2 * dim] = torch.eye(dim, dtype=torch.float64)
    A, B = fourier_mlp_weights(p)
    w_in, w_out, w_u = z(R, 4 * p), z(4 * p, R), z(R, p)
    w_in[dim : dim + p] = A  # the fresh images u_m of the numbers n{m} (basis indices 0..p-1)
    w_out[:, 2 * dim :] = B
    w_u[2 * dim :] = xi * torch.eye(p, dtype=torch.float64)
    return Pieces(tok, pos, qk1, ov1, qk2, ov2, w_in, w_out, w_u)


def forward(pieces: Pieces, tok: Tensor, allowed: Tensor | None = None) -> Tensor:
    """Last-position logits [N, p] for basis token indices `tok` [N, L] (theorem positions);
    `allowed` [L, L] (query position, key position): layer 1's keys (default all)."""
    x1 = layer1_output(pieces, tok, allowed)  # [N, L, R]
    q = x1[:, -1] @ pieces.qk2  # [N, R]
    sigma = torch.softmax(torch.einsum("nr,ntr->nt", q, x1), dim=-1)
    r = x1[:, -1] + torch.einsum("nt,ntr->nr", sigma, x1 @ pieces.ov2)
    return (r + (r @ pieces.w_in) ** 2 @ pieces.w_out) @ pieces.w_u


def per_sequence(logits: Tensor, labels: Tensor, loss: str, xi: float) -> Tensor:
    """The loss of each sequence: "ce" (cross-entropy of the logits) or "first_order"
    ((mean_y logits - logits_{y*}) / xi, the xi-derivative at 0)."""
    if loss == "ce":
        return cross_entropy_terms(logits, labels, 1.0)
    if loss == "first_order":
        return first_order_terms(logits, labels) / xi
    raise ValueError(f"loss={loss!r}: must be one of {list(LOSSES)}")


def _chunks(cfg: SimConfig, kind: Kind, chunk_size: int) -> Iterable:
    for k, wk in mixture(kind):
        for chunk in iter_compact(cfg, k, chunk_size):
            yield chunk.tok, chunk.labels, chunk.weights * wk


def piece_gradients(
    cfg: SimConfig,
    kind: Kind = "1var",
    pieces: Pieces | None = None,
    loss: str = "first_order",
    xi: float = 1.0,
    allowed: Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK // 8,
) -> tuple[float, dict[str, Tensor]]:
    """(E[loss], {piece: dE[loss]/dpiece}) over the whole population of `kind` (a kind or a
    mixture), at `pieces` (default: the theorem's start at logit scale xi). `xi` divides the
    first-order loss (the logit scale of `pieces`' w_u)."""
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r}: must be one of {list(LOSSES)}")
    pieces = theorem_pieces(cfg, xi) if pieces is None else pieces

    def chunk_value(flat: Tensor, chunk) -> Tensor:
        tok, labels, weights = chunk
        logits = forward(pieces.unflat(flat), tok, allowed)
        return (per_sequence(logits, labels, loss, xi) * weights).sum()

    value, grad = weighted_expectation(pieces.flat(), _chunks(cfg, kind, chunk_size), chunk_value)
    return float(value), pieces.unflat(grad).as_dict()


def piece_g1(
    cfg: SimConfig, kind: Kind = "1var", pieces: Pieces | None = None, xi: float = 1.0,
    allowed: Tensor | None = None,
) -> dict[str, Tensor]:  # fmt: skip
    """Every piece's G1: -grad of the first-order loss (`piece_gradients`)."""
    _, grads = piece_gradients(cfg, kind, pieces, "first_order", xi, allowed)
    return {name: -g for name, g in grads.items()}


def layer1_output(pieces: Pieces, tok: Tensor, allowed: Tensor | None = None) -> Tensor:
    """x1 [N, L, R]: the residual after layer 1 (at the theorem's start: eq. (1)'s inputs)."""
    x0 = pieces.tok[tok] + pieces.pos[None]
    s1 = torch.einsum("ntr,rq,nsq->nts", x0, pieces.qk1, x0)
    if allowed is not None:
        s1 = s1.masked_fill(~allowed[None], float("-inf"))
    return x0 + torch.softmax(s1, dim=-1) @ (x0 @ pieces.ov1)

