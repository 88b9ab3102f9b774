"""Plain-language names for what the figures plot (evaluation sets, progress measures), so
that a legend reads without the code: `set_label("1var/var")`, `legend_label` (the code name
follows in brackets), `measure_label("qk1_num_to_prev_var")`. A name with no plain form is
returned as it is.
"""

from __future__ import annotations

from empirical.task.registry import set_label as family_set_label

__all__ = ["legend_label", "measure_label", "set_label"]

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
    """The plain-language name of an evaluation set, from its task family (assign_add
    `KIND/SPLIT`, curated, chain `chain/NVAR_hH`, ...), or `name` itself where there is none."""
    return family_set_label(name) or name


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
