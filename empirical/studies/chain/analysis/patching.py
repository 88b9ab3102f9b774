"""Which layer carries which hop of a chain: activation patching of the residual stream
(docs/chain.md, "Which layer carries which hop"). A clean sequence and a corrupted copy that
differs in one token and in its answer (`number`: the number ending the operand's chain;
`pointer`: the first hop's right-hand side made the distractor's variable); the corrupted run
gets the clean stream at one position (a chain role, `chain_structure`) and one point (before
layer 1, ..., after the last layer), and each cell is the share of the clean-minus-corrupted
logit difference restored (ratio of means over the sequences).

    result = chain_patching(model, vocab, tokens, corruption="number")
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from empirical.report.figures import save_figure
from empirical.report.writer import Figure, Json, Report
from empirical.studies.chain.analysis.attention import chain_structure

__all__ = ["CORRUPTIONS", "chain_patching", "corrupt", "plot_chain_patching", "report",
           "resolve_label"]  # fmt: skip

CORRUPTIONS = ("number", "pointer")


def resolve_label(vocab, ids) -> int:
    """The answer of one sequence (token ids [L]) by following every pointer (the
    vocabulary's own resolver, not the task's sampler); a TokenizeError (a ValueError) for
    an unassigned variable or a cycle."""
    assigns, a, b = vocab._parse_ids(ids)
    bindings = {v: value for v, value, _ in assigns}
    L = vocab.L
    return (vocab._resolve(a, bindings, L - 3) + vocab._resolve(b, bindings, L - 2)) % vocab.p


def _roles(s: dict, operand_vars: dict[int, int], L: int) -> dict[str, int]:
    """Role name -> position in one sequence, from its `chain_structure` and the variables at
    the operand positions ({position: variable index})."""
    roles: dict[str, int] = {}
    assign = s["assign"]
    if s["chains"]:
        chain = s["chains"][0]
        start = assign[chain[0]][2]
        roles["operand"] = next((pos for pos, v in operand_vars.items() if v == start), L - 3)
        for k, idx in enumerate(chain, start=1):
            roles[f"hop {k} LHS"] = assign[idx][0]
            roles[f"hop {k} RHS"] = assign[idx][1]
    if s["off_chain"]:
        roles["distractor RHS"] = assign[s["off_chain"][0]][1]
    roles["query"] = L - 1
    return roles


def corrupt(vocab, ids: torch.Tensor, corruption: str, generator: torch.Generator):
    """(corrupted ids, its answer, the roles' positions) for one sequence, or None where the
    corruption does not apply (no variable operand, no distractor for `pointer`) or leaves
    the answer as it was."""
    if corruption not in CORRUPTIONS:
        raise ValueError(f"corruption = {corruption!r}: use one of {', '.join(CORRUPTIONS)}")
    s = chain_structure(vocab, ids)
    if not s["chains"]:
        return None
    L = len(ids)
    operand_vars = {pos: int(ids[pos]) - vocab.p for pos in (L - 3, L - 2)}
    chain, assign = s["chains"][0], s["assign"]
    new = ids.clone()
    if corruption == "number":
        pos = assign[chain[-1]][1]
        shift = int(torch.randint(1, vocab.p, (1,), generator=generator))
        new[pos] = (int(ids[pos]) + shift) % vocab.p
    else:
        off = s["off_chain"]
        if len(chain) < 2 or not off:
            return None
        new[assign[chain[0]][1]] = vocab.p + assign[off[0]][2]
    try:
        label = resolve_label(vocab, new)
    except ValueError:
        return None
    if label == resolve_label(vocab, ids):
        return None
    return new, label, _roles(s, operand_vars, L)


@torch.no_grad()
def chain_patching(model, vocab, tokens: torch.Tensor, corruption: str = "number",
                   seed: int = 0) -> dict:  # fmt: skip
    """Restored share of the logit difference per (stream point, role) over the sequences
    `tokens` [n, L] that the corruption applies to. Returns {"corruption", "n", "points",
    "roles", "restored": {point: {role: share or None}}, "clean_minus_corrupted"}."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(tokens.shape[0]):
        c = corrupt(vocab, tokens[i], corruption, g)
        if c is not None:
            rows.append((i, *c))
    n_layers = model.cfg.n_layers
    points = [f"blocks.{l}.hook_resid_pre" for l in range(n_layers)]
    points.append(f"blocks.{n_layers - 1}.hook_resid_post")
    labels = [f"before layer {l + 1}" for l in range(n_layers)] + [f"after layer {n_layers}"]
    out = {"corruption": corruption, "n": len(rows), "points": labels, "roles": [],
           "restored": {lab: {} for lab in labels}}  # fmt: skip
    if not rows:
        return out
    device = next(model.parameters()).device
    clean = tokens[[r[0] for r in rows]].to(device)
    bad = torch.stack([r[1] for r in rows]).to(device)
    y_clean = torch.tensor([resolve_label(vocab, t) for t in clean.cpu()], device=device)
    y_bad = torch.tensor([r[2] for r in rows], device=device)
    ar = torch.arange(len(rows), device=device)

    def diff(logits: torch.Tensor) -> torch.Tensor:
        last = logits[:, -1] if logits.ndim == 3 else logits
        return last[ar, y_clean] - last[ar, y_bad]

    clean_logits, cache = model.run_with_cache(clean, names_filter=lambda name: name in points)
    d_clean, d_bad = diff(clean_logits), diff(model(bad))
    roles = sorted({role for r in rows for role in r[3]}, key=_role_order)
    out["roles"] = roles
    out["clean_minus_corrupted"] = float((d_clean - d_bad).mean())
    for role in roles:  # every role appears in some row (roles come from the rows)
        have = [j for j, r in enumerate(rows) if role in r[3]]
        idx = torch.tensor(have, device=device)
        pos = torch.tensor([rows[j][3][role] for j in have], device=device)
        gap = float((d_clean[idx] - d_bad[idx]).mean())
        for point, lab in zip(points, labels, strict=True):

            def write_clean(resid, hook, idx=idx, pos=pos, point=point):
                resid[idx, pos] = cache[point][idx, pos].to(resid.dtype)
                return resid

            d = diff(model.run_with_hooks(bad, fwd_hooks=[(point, write_clean)]))
            out["restored"][lab][role] = float((d[idx] - d_bad[idx]).mean()) / gap if gap else None
    return out


def _role_order(role: str) -> tuple:
    if role == "operand":
        return (0, 0, 0)
    if role.startswith("hop "):
        k, side = role[4:].split(" ")
        return (1, int(k), side == "RHS")
    return (2 if role == "distractor RHS" else 3, 0, 0)


def plot_chain_patching(results: list[dict], path=None, title: str = "", *, fmt=None):
    """One heat map per corruption: stream points (rows, the embedding at the top) x roles
    (columns), the restored share of the logit difference written in each cell."""
    fig, axes = plt.subplots(1, len(results), figsize=(6.2 * len(results), 4.2),
                             layout="constrained", squeeze=False)  # fmt: skip
    image = None
    for ax, res in zip(axes[0], results, strict=True):
        roles, points = res["roles"], res["points"]
        grid = [[res["restored"][p].get(r) for r in roles] for p in points]
        values = [[float("nan") if v is None else v for v in row] for row in grid]
        image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v is not None:
                    ax.text(j, i, f"{round(v, 2) + 0.0:.2f}", ha="center", va="center", fontsize=8,
                            color="black" if v > 0.6 else "white")  # fmt: skip
        ax.set_xticks(range(len(roles)), roles, rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(len(points)), points, fontsize=8)
        ax.set_xlabel("position patched (the chain's role)")
        ax.set_ylabel("residual stream point")
        ax.set_title(f"corrupted: the {res['corruption']} ({res['n']} sequences)", fontsize=10)
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), label="share of the logit difference restored")
    fig.suptitle(title or "Activation patching of the chain's residual stream")
    return save_figure(fig, path, fmt)


def report(set_name: str, where: str, results: list[dict], label: str) -> Report:
    """What `chain-patching` writes for `results` (one per corruption, on `set_name`, weights
    `where`): chain_patching_SET.json and .png (SET with `/` as `_`)."""
    stem = f"chain_patching_{set_name.replace('/', '_')}"
    title = ("Which layer carries which hop: patching the clean residual stream into the "
             f"corrupted run ({label}, {set_name}, {where})")  # fmt: skip
    return Report({
        f"{stem}.json": Json({"set": set_name, "weights": where, "results": results}, indent=2,
                             plain=True),
        stem: Figure(lambda: plot_chain_patching(results, None, title)),
    }, summary=None)  # fmt: skip
