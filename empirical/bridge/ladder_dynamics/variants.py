"""The dynamics ladder's variants: which pieces of the theorem's model train, with which
optimiser, on which data (docs/ladder.md, "The baseline and the releases"). The baseline
trains layer 2's W_Q alone with plain SGD on the 1-var population; each release frees one
constraint (`DESCRIPTIONS`); `ladder_variants` lists the baseline, each release alone and the
cumulative ladder.
"""

from __future__ import annotations

from empirical.bridge.ladder_dynamics.config import RELEASES

DESCRIPTIONS = {
    "ov": "layer-2 W_V, W_O trainable (from the theorem's W_OV)",
    "mlp": "MLP W_in, W_out and unembedding W_U trainable (from F, xi)",
    "layer1": "layer-1 W_Q, W_K, W_V, W_O trainable (from the hand-set routing)",
    "embeddings": "W_E, W_pos trainable (from the orthonormal ones)",
    "adamw": "AdamW instead of plain SGD",
    "mix": "the authors' 0/1/2-var mix (12/20/10 of 42), mixed operand order",
    "task": "the authors' task rules in training: r1/r2 restrictions, held-out value pairs",
}
# parameters each piece release makes trainable (the model's parameter names)
PARAMETERS = {
    "qk": ("blocks.1.attn.W_Q",),
    "ov": ("blocks.1.attn.W_V", "blocks.1.attn.W_O"),
    "mlp": ("blocks.1.mlp.W_in", "blocks.1.mlp.W_out", "unembed.W_U"),
    "layer1": tuple(f"blocks.0.attn.W_{x}" for x in "QKVO"),
    "embeddings": ("embed.W_E", "pos_embed.W_pos"),
}
assert set(DESCRIPTIONS) == set(RELEASES)


def variant_name(releases: tuple[str, ...]) -> str:
    return "+".join(releases) if releases else "baseline"


def ladder_variants(releases: list[str] | tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """[(name, releases)]: the baseline, each release alone, then the cumulative ladder."""
    out = [("baseline", ())]
    out += [(r, (r,)) for r in releases]
    out += [(variant_name(tuple(releases[:k])), tuple(releases[:k]))
            for k in range(2, len(releases) + 1)]  # fmt: skip
    return out


def trainable_names(
    releases: tuple[str, ...], qk_factors: bool = False
) -> dict[str, tuple[str, ...]]:
    """{group: parameter names} that train under `releases` ("qk" always: layer 2's W_Q, and
    its W_K too with `qk_factors`)."""
    out = {g: PARAMETERS[g] for g in ("qk", *releases) if g in PARAMETERS}
    if qk_factors:
        out["qk"] = (*PARAMETERS["qk"], "blocks.1.attn.W_K")
    return out
