"""The model's parameters in the groups the theory talks about (issue #36).

    group_of("blocks.1.attn.W_Q")        # "layer2_qk"
    groups_of_names(param_names(2))      # {"W_E": ["embed.W_E"], ..., "unembed": [...]}

Groups: `W_E`, `W_pos`, `layer1_qk` / `layer1_ov` (block 0's W_Q, W_K / W_V, W_O),
`layer2_qk` / `layer2_ov` (the last block's: Theorem C.1's W is layer2_qk), `mlp`, `unembed`;
a deeper model's middle blocks are `middle_qk` / `middle_ov`. The attribution
(empirical.bridge.attribution) and train.freeze (empirical.train.constraints) both name them
so; docs/attribution.md.
"""

from __future__ import annotations

GROUPS = ("W_E", "W_pos", "layer1_qk", "layer1_ov", "layer2_qk", "layer2_ov", "mlp", "unembed")
MIDDLE_GROUPS = ("middle_qk", "middle_ov")


def group_of(name: str, n_layers: int = 2) -> str:
    """The group of the parameter `name` (an AssignAddTransformer parameter name)."""
    if name == "embed.W_E":
        return "W_E"
    if name == "pos_embed.W_pos":
        return "W_pos"
    if name == "unembed.W_U":
        return "unembed"
    parts = name.split(".")
    if parts[0] != "blocks" or len(parts) != 4:
        raise ValueError(f"{name!r} is not a parameter of the model")
    layer, kind, matrix = int(parts[1]), parts[2], parts[3]
    if kind == "mlp":
        return "mlp"
    part = "qk" if matrix in ("W_Q", "W_K", "b_rel") else "ov"  # b_rel: a score bias
    if layer == 0:
        return f"layer1_{part}"
    if layer == n_layers - 1:
        return f"layer2_{part}"
    return f"middle_{part}"


def groups_of_names(names, n_layers: int = 2) -> dict[str, list[str]]:
    """{group: [parameter names]} in GROUPS order (the middle groups after layer1_ov)."""
    out: dict[str, list[str]] = {}
    order = list(GROUPS[:4]) + list(MIDDLE_GROUPS) + list(GROUPS[4:])
    found = {n: group_of(n, n_layers) for n in names}
    for g in order:
        members = [n for n in names if found[n] == g]
        if members:
            out[g] = members
    return out


def check_groups(values, what: str) -> list[str]:
    """`values` as a list of known group names; a ValueError naming the bad one otherwise."""
    allowed = GROUPS + MIDDLE_GROUPS
    out = []
    for v in values:
        if v not in allowed:
            raise ValueError(
                f"{what}: {v!r} is not a parameter group; allowed {', '.join(allowed)}"
            )
        out.append(v)
    return out
