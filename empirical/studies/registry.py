"""What the task families add to the commands, as tables the dispatcher reads before any
argument is parsed (so this module imports nothing):

    ANALYSES[family]  "module:function(run_dir, options) -> exit status": what `analyze` runs
                      on a run of that family, given its AnalyzeOptions (none: the paper's
                      analysis, empirical.analysis.run_analysis)
    COMMANDS[name]    (module, one-line help, "module:OptionsClass"): the commands the
                      families add to `python -m empirical`; the options class is torch-free,
                      the module (imported after the options are checked) has `run(options)`
"""

from __future__ import annotations

__all__ = ["ANALYSES", "COMMANDS"]

_CHAIN = "empirical.studies.chain"

ANALYSES: dict[str, str] = {
    "chain": f"{_CHAIN}.analysis.mechanisms:analyze_chain",
    "lego": "empirical.studies.lego.commands:analyze_lego",
}

COMMANDS: dict[str, tuple[str, str, str]] = {
    "chain-attention": (f"{_CHAIN}.commands.attention",
                        "a chain run's attention onto the chain's targets, per layer",
                        f"{_CHAIN}.options:ChainAttentionOptions"),
    "chain-patching": (f"{_CHAIN}.commands.patching",
                       "a chain run's residual stream patched: which layer carries which hop",
                       f"{_CHAIN}.options:ChainPatchingOptions"),
    "chain-compare-qk": (f"{_CHAIN}.commands.compare_qk", "a chain run's QK updates vs the "
                         "two-hop theory, and the order of the hops",
                         f"{_CHAIN}.options:ChainCompareQKOptions"),
    "graph-ladder": ("empirical.studies.graph.commands",
                     "the seed's ablation ladder on the graph family, over seeds",
                     "empirical.studies.graph.options:GraphLadderOptions"),
    "graph-mechanism": ("empirical.studies.graph.mechanism_command",
                        "a recurrent graph run's heads and MLP, iteration by iteration",
                        "empirical.studies.graph.options:GraphMechanismOptions"),
}  # fmt: skip
