"""Symbolic side of Theorem C.1 (paper Appendix C): G1 and the identities derived with sympy.

Modules: ``symbols`` (a, b, p, K, beta; Z), ``fourier`` (the Fourier MLP's lemmas),
``expectations`` (exact expectations by Kronecker-delta counting), ``population`` (the
sequences as weighted sites), ``g1_closed_form`` (derivation of every entry of G1),
``statement`` (the reconstructed theorem, signs), ``second_order`` (G2), ``remainder``
(a rigorous O(xi^2) bound), ``piece_closed_form`` (other pieces' G1 at W^0; G1's memory
block at a given attention and ebar Gram matrix), ``claims``
(numeric checks of the six claims against ``disentangled``), ``report``; ``hops`` (Theorem C.1
per hop: the two-hop chain model's derivations, checks and report section, with the
interface of ``claims`` and ``report``).  See docs/theory.md.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "build_report",
    "g1_matrix",
    "g2_matrix",
    "remainder_bound",
    "run_checks",
    "sign_summary",
    "statement",
    "write_report",
]

# imported on first use (sympy is slow to import): `import theory` stays light
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "theory.g1_closed_form": ["g1_matrix"],
        "theory.report": ["build_report", "run_checks", "write_report"],
        "theory.remainder": ["remainder_bound"],
        "theory.second_order": ["g2_matrix"],
        "theory.statement": ["sign_summary", "statement"],
    },
)
