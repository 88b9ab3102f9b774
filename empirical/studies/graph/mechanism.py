"""A recurrent graph model's mechanism, iteration by iteration: the seed's three measures on
our model (docs/graph.md, "The mechanism").

    groups = head_groups(model, vocab, batch)       # each head's relative attention change per
                                                    # perturbed operand slot, per iteration
    ov = ov_by_factor(model, vocab)                 # each factor's gain through W_V W_O
    dft = mlp_spectrum(model, vocab, op="+")        # the MLP's input/output over operand values
    fetch = fetch_attention(model, vocab, batch)    # where a node looks when it is resolved

Head groups: for graphs of a set, the last node with the most operands (k); for each slot j
< k its operand name is replaced by another name defined earlier (the graph stays valid) and
each head's attention row at the node's position is compared with the original's (squared
L2 change); a head's relative variance for slot j is its change for j over its changes for
all slots; its group is the slot of the largest share. OV: P_f projects onto the span of a
factor's embedding rows (names, values, marks, positions); the operator norm of P_f W_V W_O
P_f over W_V W_O's. MLP: the probe `x -> a; y -> b; a op b -> c;` for every x, y; at c, in the
iteration that resolves it (t = 1), the 2-D DFT over (x, y) of the MLP's input (resid_mid)
and output (mlp_out): the share of power at (0, 0), on the diagonal the operation predicts
((u, u) for +, (u, -u) for -) and elsewhere.
"""

from __future__ import annotations

import torch

from empirical.model.forward import RowContext
from empirical.task.batch import Batch
from empirical.train.targets import row_context

__all__ = [
    "FACTORS", "fetch_attention", "head_groups", "mlp_spectrum", "ov_by_factor", "renamable",
]

FACTORS = ("names", "values", "marks", "positions")


def _perturbed(vocab, batch: Batch) -> tuple[list[int], list, list[int], int]:
    """(rows probed, their {slot: ids with that operand renamed}, node positions, k): the
    probed node of each row is its last node with the most operands any row has."""
    k = max(len(n.operands) for row in batch.tokens for n in vocab.nodes(row))
    picked, out, positions = [], [], []
    for i, ids in enumerate(batch.tokens):
        nodes = vocab.nodes(ids)
        probed = [n for n in nodes if len(n.operands) == k]
        if not probed:
            continue
        node = probed[-1]
        earlier = [n.name for n in nodes if n.position < node.position]
        used = {vocab.p + o for o in node.operands}
        spare = [name for name in earlier if name not in used]
        if not spare:
            continue
        start = node.position - 2 * k
        variants = {}
        for slot in range(k):
            changed = ids.clone()
            changed[start + 2 * slot] = spare[slot % len(spare)]
            variants[slot] = changed
        picked.append(i)
        out.append(variants)
        positions.append(node.position)
    return picked, out, positions, k


def renamable(vocab, batch: Batch) -> bool:
    """Whether some graph of `batch` has a node whose operands head_groups can rename."""
    return bool(_perturbed(vocab, batch)[0])


def _context(model, batch: Batch, tokens: torch.Tensor) -> RowContext:
    """The rows' context with `tokens` in place of theirs (same node positions and depths)."""
    ctx = row_context(model.cfg, batch)
    T = ctx.iterations
    if T is not None:  # a renamed operand may change a node's depth: enough iterations
        T = torch.full_like(T, int(T.max()) + 1)
    return RowContext(ctx.pos_offset, T, ctx.slots)


@torch.no_grad()
def _patterns(model, batch, tokens, positions, iterations):
    """Attention rows [iteration, layer, row, head, key] at each row's node position."""
    _, cache = model.run_with_cache(tokens, context=_context(model, batch, tokens))
    rows = torch.arange(len(tokens))
    pos = torch.tensor(positions)
    return torch.stack([
        torch.stack([cache[f"iter.{t}.blocks.{layer}.attn.hook_pattern"][rows, :, pos]
                     for layer in range(model.cfg.n_layers)])
        for t in range(iterations)
    ])  # fmt: skip


@torch.no_grad()
def head_groups(model, vocab, batch: Batch, iterations: int) -> dict:
    """Per iteration, layer and head: the share of its attention change due to each operand
    slot, and its group (module docstring)."""
    picked, rows, positions, k = _perturbed(vocab, batch)
    if not picked:
        raise ValueError("no graph of the set has a node whose operands can be renamed")
    sub = batch[torch.tensor(picked, dtype=torch.long)]
    base = _patterns(model, sub, sub.tokens, positions, iterations)
    change = []
    for slot in range(k):
        tokens = torch.stack([r[slot] for r in rows])
        moved = _patterns(model, sub, tokens, positions, iterations)
        change.append(((moved - base) ** 2).sum(-1).mean(2))  # [iteration, layer, head]
    change = torch.stack(change, -1)  # [iteration, layer, head, slot]
    share = change / change.sum(-1, keepdim=True).clamp(min=1e-12)
    return {
        "operands": k,
        "rows": len(rows),
        "share": share.tolist(),
        "change": change.tolist(),
        "group": share.argmax(-1).tolist(),
    }


@torch.no_grad()
def fetch_attention(model, vocab, batch: Batch) -> dict:
    """Where each head looks at the iteration that resolves a computed node (t = its depth),
    every layer. From the node: its mean attention weight on the definition of an operand (the
    slot the seed's induction heads read), on the latest definition before the node when that
    is not an operand (what recency reads), and on one other definition (the mean over the
    rest). From each operand's occurrence in the node's clause: on that operand's definition
    (a fetch where the name is written: the token matches its own earlier copy) and on one
    other definition before it."""
    _, cache = model.run_with_cache(batch.tokens, context=row_context(model.cfg, batch))
    L, H = model.cfg.n_layers, model.cfg.n_heads
    sums = torch.zeros(5, L, H, dtype=torch.float64)
    counts = torch.zeros(5)

    def add(k, weights):
        sums[k] += weights
        counts[k] += 1

    for r, ids in enumerate(batch.tokens):
        nodes = vocab.nodes(ids)
        where = {n.name: n.position for n in nodes}
        for i, node in enumerate(nodes):
            if node.literal is not None:
                continue
            operands = [where[vocab.p + o] for o in node.operands]
            k = len(operands)  # `a op b -> x`: slot j's occurrence is 2 (k - j) back
            queries = [node.position, *(node.position - 2 * (k - j) for j in range(k))]
            pattern = torch.stack([cache[f"iter.{node.depth}.blocks.{layer}.attn.hook_pattern"]
                                   [r, :, queries] for layer in range(L)]).double()
            at_node = pattern[:, :, 0]  # [L, H, key]
            for at in operands:
                add(0, at_node[..., at])
            latest = nodes[i - 1].position
            if latest not in operands:
                add(1, at_node[..., latest])
            rest = [n.position for n in nodes[:i] if n.position not in {*operands, latest}]
            if rest:
                add(2, at_node[..., rest].mean(-1))
            for slot, at in enumerate(operands):
                at_use = pattern[:, :, 1 + slot]
                add(3, at_use[..., at])
                others = [n.position for n in nodes[:i] if n.position != at]
                if others:
                    add(4, at_use[..., others].mean(-1))
    mean = sums / counts.clamp(min=1)[:, None, None]
    return {"operands": int(counts[0]), "operand": mean[0].tolist(),
            "latest": mean[1].tolist(), "other": mean[2].tolist(),
            "at_use_operand": mean[3].tolist(), "at_use_other": mean[4].tolist()}  # fmt: skip


@torch.no_grad()
def position_preferences(model) -> dict | None:
    """A relative-position model's score bias per head (relative_gain x b_rel): the distance
    it favours most, that bias, and its margin over the median distance's (a margin of ~5
    lets a head look at one key among dozens). None for a learned-position model."""
    if model.cfg.positions != "relative":
        return None
    out = []
    for layer in range(model.cfg.n_layers):
        bias = model.cfg.relative_gain * model.blocks[layer].attn.b_rel.detach().double()
        top = bias.max(-1)
        out.append([{"distance": int(top.indices[h]), "bias": float(top.values[h]),
                     "margin": float(top.values[h] - bias[h].median())}
                    for h in range(model.cfg.n_heads)])  # fmt: skip
    return {"gain": model.cfg.relative_gain, "heads": out}


@torch.no_grad()
def ov_by_factor(model, vocab) -> dict:
    """Per layer and head, each factor's gain through W_V W_O against a random direction's:
    (||E_f W_V W_O||_F / ||E_f||_F) / (||W_V W_O||_F / sqrt(d_model)), E_f the factor's
    embedding rows centred on their mean (what tells its items apart): > 1, the head
    carries that factor more than a random direction; < 1, less. Positions are a factor of
    a learned-position model only (model.positions = "relative" adds no W_pos)."""
    p, K = vocab.p, vocab.K
    W_E = model.W_E.detach().double()
    spans = {
        "names": W_E[p : p + K], "values": W_E[:p], "marks": W_E[p + K :],
        "positions": model.W_pos.detach().double(),
    }  # fmt: skip
    if model.cfg.positions != "learned":
        del spans["positions"]
    centred = {f: rows - rows.mean(0) for f, rows in spans.items()}
    d = model.cfg.d_model
    out = []
    for layer in range(model.cfg.n_layers):
        heads = []
        for h in range(model.cfg.n_heads):
            ov = (model.W_V[layer, h] @ model.W_O[layer, h]).double()
            random = torch.linalg.matrix_norm(ov) / d**0.5
            heads.append({f: float(torch.linalg.matrix_norm(e @ ov) / torch.linalg.matrix_norm(e)
                                   / random) for f, e in centred.items()})  # fmt: skip
        out.append(heads)
    return {"factors": list(spans), "ratio": out}


def _probe(vocab, op: str) -> tuple[torch.Tensor, int]:
    """Token ids [p * p, L] of `x -> x0; y -> x1; x0 op x1 -> x2;` for every (x, y), and
    the position of x2."""
    p = vocab.p
    rows = []
    for x in range(p):
        for y in range(p):
            rows.append(vocab.encode(f"{x} -> x0; {y} -> x1; x0 {op} x1 -> x2;"))
    return torch.stack(rows), 12


def _spectrum(acts: torch.Tensor, p: int, op: str) -> dict:
    """Shares of the 2-D DFT power over (x, y) of acts [p * p, d], summed over d."""
    grid = acts.double().reshape(p, p, -1)
    power = torch.fft.fft2(grid, dim=(0, 1)).abs().pow(2).sum(-1)
    total = float(power.sum())
    u = torch.arange(p)
    diag = torch.zeros(p, p, dtype=torch.bool)
    diag[u, u if op == "+" else (-u) % p] = True
    diag[0, 0] = False
    dc = float(power[0, 0]) / total
    on_diag = float(power[diag].sum()) / total
    per_frequency = [float(power[a, a if op == "+" else (-a) % p]) / total for a in range(p)]
    return {"dc": dc, "diagonal": on_diag, "rest": 1 - dc - on_diag,
            "diagonal_by_frequency": per_frequency, "_power": power}  # fmt: skip


@torch.no_grad()
def mlp_spectrum(model, vocab, op: str = "+") -> dict:
    """The MLP's input and output at the probe's node in the iteration that resolves it, as
    DFT power shares over the operand values (module docstring); also the probe's accuracy."""
    tokens, at = _probe(vocab, op)
    layer = model.cfg.n_layers - 1
    slots = torch.zeros_like(tokens, dtype=torch.bool)
    slots[:, [2, 6, at]] = True
    T = torch.full((len(tokens),), 2 + model.cfg.iterations - 1)
    context = RowContext(iterations=T if model.cfg.recurrence == "depth" else None, slots=slots)
    logits, cache = model.run_with_cache(tokens, context=context)
    out = {}
    for name, hook in (("input", "hook_resid_mid"), ("output", "hook_mlp_out")):
        acts = cache[f"iter.1.blocks.{layer}.{hook}"][:, at]
        out[name] = _spectrum(acts, vocab.p, op)
    x, y = torch.meshgrid(torch.arange(vocab.p), torch.arange(vocab.p), indexing="ij")
    want = (x + y if op == "+" else x - y if op == "-" else x * y).reshape(-1) % vocab.p
    out["probe_accuracy"] = float((logits[:, at].argmax(-1) == want).double().mean())
    out["op"] = op
    return out
