"""The paper authors' training step as their train.py runs it, to time ours against.

A TransformerLens `HookedTransformer` of the run config's sizes (for configs/authors.toml: 2
layers, 1 head, d_model = d_head = 128, d_mlp 512, ReLU, no LayerNorm, n_ctx 16, 74 input and
59 output tokens; TransformerLens's own initialisation, seed 42), every bias and the block-0 MLP
frozen at zero; one step = the full forward of every position, cross-entropy at the last
position only, backward, torch AdamW over the trainable weights with the config's lr, weight
decay and betas (../shared/authors/README.md, "Model and optimiser"). float32: their bf16
autocast on CUDA is left out, as our float32 config leaves it out.

TransformerLens 4 removed `HookedTransformer`: the reference needs TransformerLens 3.x, e.g.
    pip install --no-deps --target DIR 'transformer-lens>=3.9,<4' better-abc \\
        'transformers-stream-generator<0.1'
    PYTHONPATH=DIR python benchmarks/bench_engine.py ...
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


def unavailable() -> str | None:
    """Why the reference cannot run here (None: it can)."""
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig  # noqa: F401
    except ImportError:
        return (
            f"TransformerLens {transformer_lens_version()} has no HookedTransformer (removed in "
            "4.0); with TransformerLens 3.x on PYTHONPATH it runs (benchmarks/tl_reference.py)"
        )
    return None


def transformer_lens_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("transformer-lens")


def authors_step(cfg, device: torch.device) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """step(tokens [B, L], labels [B]): one training step of the authors' HookedTransformer
    built for the run config `cfg` (a RunConfig), on `device`."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    mc, tc = cfg.built_model_config(), cfg.train
    model = HookedTransformer(
        HookedTransformerConfig(
            n_layers=2,
            d_model=mc.d_model,
            n_ctx=mc.n_ctx,
            d_head=mc.d_head,
            n_heads=1,
            d_mlp=mc.d_mlp,
            d_vocab=mc.d_vocab,
            d_vocab_out=mc.d_vocab_out,
            act_fn="relu",
            normalization_type=None,
            default_prepend_bos=False,
            init_weights=True,
            seed=42,
            device=str(device),
            dtype=torch.float32,
        )
    )
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.split(".")[-1].startswith("b_") or name.startswith("blocks.0.mlp."):
                param.zero_()
                param.requires_grad_(False)
    model.train()
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=tc.lr,
        weight_decay=tc.weight_decay,
        betas=tuple(tc.betas),
    )

    def step(tokens: torch.Tensor, labels: torch.Tensor) -> None:
        logits = model(tokens, return_type="logits")[:, -1, :]
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step
