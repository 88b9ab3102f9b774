"""Plain-language names for what the figures plot: evaluation sets, progress measures and the
compare-qk frames and gradients, so that a legend reads without the code.

    set_label("1var/var")        -> "1 variable, at a position it never held in training"
    legend_label("1var/var")     -> "1 variable, at a position it never held in training [1var/var]"
    measure_label("qk1_num_to_prev_var")

The code name follows in brackets (`legend_label`), so a reader can find the series in
metrics.jsonl or analysis.json. A name with no plain form is returned as it is.
"""

from __future__ import annotations

__all__ = [
    "legend_label",
    "measure_label",
    "set_label",
]

_KIND = {"0var": "0 variables", "1var": "1 variable", "2var": "2 variables"}
_SETS = {
    "0var/ind": "0 variables: trained value pairs",
    "0var/pair": "0 variables: held-out value pairs",
    "1var/ind": "1 variable: trained pairs and positions",
    "1var/pair": "1 variable: held-out value pair",
    "1var/var": "1 variable at a position it never held in training",
    "1var/both": "1 variable: held-out pair and untrained position",
    "2var/ind": "2 variables: trained pairs and positions",
    "2var/pair": "2 variables: held-out value pair",
    "2var/var": "2 variables, one at a position it never held in training",
    "2var/both": "2 variables: held-out pair and untrained position",
    "curated/held_out_pairs": "curated: held-out value pairs",
    "curated/novel_orderings": "curated: novel assignment orderings",
}

_MEASURES = {
    "ov2_mlp2_accuracy": "layer-2 OV + MLP add the routed values",
    "qk1_num_to_prev_var": "layer-1 QK: number -> previous variable",
    "qk2_ov1_var_identity": "layer-2 QK: variable identity (ebar_u -> ebar_u)",
    "attn_l1_equal_to_operands": "layer-1 attention: `=` -> operands",
    "attn_l1_num_to_prev": "layer-1 attention: number -> its variable",
    "attn_l2_equal_to_values": "layer-2 attention: `=` -> operand values",
    "probe_l1_var_from_num": "probe: variable readable at its number",
}


def set_label(name: str) -> str:
    """The plain-language name of an evaluation set (assign_add `KIND/SPLIT`, curated, chain
    `chain/NVAR_hH`), or `name` itself where there is none."""
    if name in _SETS:
        return _SETS[name]
    kind, _, split = name.partition("/")
    if kind == "chain":
        return _chain_set_label(split) or name
    return name


def _chain_set_label(split: str) -> str | None:
    if split == "0var":
        return "chain: 0 variables"
    if split == "held_out_pointers":
        return "chain: held-out pointer pairs"
    head, _, hops = split.partition("_h")
    if head in _KIND and hops.isdigit():
        return f"chain: {_KIND[head]}, {hops} hop{'s' if hops != '1' else ''}"
    return None


def legend_label(name: str) -> str:
    """`set_label(name)` followed by the code name in brackets (only the code name where
    there is no plain form)."""
    plain = set_label(name)
    return name if plain == name else f"{plain} [{name}]"


def measure_label(name: str) -> str:
    """A progress measure's plain name with its code name in brackets; `NAME@authors` (the
    authors' definition) keeps its suffix."""
    base, at, who = name.partition("@")
    plain = _MEASURES.get(base)
    if plain is None:
        return name
    return f"{plain}{' (authors)' if at else ''} [{base}]"
