"""What a task family adds on top of the toolkit, one package per family (`chain/`, `lego/`):
its analyses and its commands. The task itself (fields, vocabulary, sampler, evaluation sets)
is the family's package under empirical/task/.

    ANALYSES[family]  "module:function(run_dir, args) -> exit status": what `analyze` runs on
                      a run of that family (none: the paper's analysis, empirical.analysis)
    COMMANDS[name]    (module, one-line help): the commands the families add to
                      `python -m empirical` (the dispatcher imports a module when it runs)

Importing this module imports nothing else: the dispatcher reads it before any argument is
parsed.
"""

from __future__ import annotations

__all__ = ["ANALYSES", "COMMANDS"]

_CHAIN = "empirical.studies.chain.commands"

ANALYSES: dict[str, str] = {
    "chain": f"{_CHAIN}.analyze:analyze_chain",
    "lego": "empirical.studies.lego.commands:analyze_lego",
}

COMMANDS: dict[str, tuple[str, str]] = {
    "chain-attention": (f"{_CHAIN}.attention",
                        "a chain run's attention onto the chain's targets, per layer"),
    "chain-patching": (f"{_CHAIN}.patching",
                       "a chain run's residual stream patched: which layer carries which hop"),
    "chain-compare-qk": (f"{_CHAIN}.compare_qk", "a chain run's QK updates vs the "
                         "two-hop theory, and the order of the hops"),
}  # fmt: skip
