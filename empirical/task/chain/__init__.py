"""The chain family: multi-hop assignment, `a=17,c=4,b=a,d=b,b+5=?` (docs/task.md, "The chain
family"; docs/chain.md). Its task config `ChainTask` in `config.py`, its tokenizer in
`vocab.py`, the sampler in `draw.py`, the sets in `eval_sets.py` (these three imported when
used: torch); its analyses and commands are empirical/studies/chain/. No torch on import.
"""

from __future__ import annotations

from empirical.task.chain.config import ChainTask
from empirical.task.family import Family

__all__ = ["FAMILY", "Chain"]

_KIND = {"0var": "0 variables", "1var": "1 variable", "2var": "2 variables"}


class Chain(Family):
    """Assignments that may point to another variable (`b=a`); operands resolve through them."""

    name = "chain"
    title = "Multi-hop assignment (chain)"
    config = ChainTask
    set_prefixes = ("chain/",)

    def vocabulary(self, task):
        from empirical.task.chain.vocab import ChainVocabulary

        return ChainVocabulary(task.p, task.K, task.L)

    def layout(self, task) -> tuple[int, int, int]:
        return task.p, task.K, task.L

    def held_out(self, task, seed: int):
        from empirical.task.pairs import held_out_pairs

        return held_out_pairs(task, seed)

    def training_sampler(self, task, held_out, device="cpu"):
        from empirical.task.chain.draw import ChainSampler

        return ChainSampler(task, held_out, device)

    def eval_set_names(self, task) -> tuple[str, ...]:
        from empirical.task.chain.eval_sets import chain_eval_set_names

        return chain_eval_set_names(task)

    def split_help(self) -> str:
        return "with task.family=chain: chain/0var, chain/1var_h1, chain/2var_h2, ..."

    def build_eval_set(self, task, seed: int, name: str, held_out):
        from empirical.task.chain.eval_sets import build_chain_eval_set

        return build_chain_eval_set(task, seed, name, held_out)

    def set_label(self, name: str) -> str | None:
        split = name.partition("/")[2]
        if split == "0var":
            return "chain: 0 variables"
        if split == "held_out_pointers":
            return "chain: held-out pointer pairs"
        head, _, hops = split.partition("_h")
        if head in _KIND and hops.isdigit():
            return f"chain: {_KIND[head]}, {hops} hop{'s' if hops != '1' else ''}"
        return None

    def panel(self, name: str) -> str:
        """`chain/NVAR_hH` in the NVAR panel (with assign_add's sets), the others in `chain`."""
        head = name.partition("/")[2].partition("_")[0]
        return head if head in _KIND else "chain"


FAMILY = Chain()
