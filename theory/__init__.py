"""Symbolic side of Theorem C.1 (paper Appendix C): G1 and the identities derived with sympy.

Modules: ``symbols`` (a, b, p, K, beta; Z), ``fourier`` (the Fourier MLP's lemmas),
``expectations`` (exact expectations by Kronecker-delta counting), ``population`` (the
sequences as weighted sites), ``g1_closed_form`` (derivation of every entry of G1),
``statement`` (the reconstructed theorem, signs), ``second_order`` (G2), ``remainder``
(a rigorous O(xi^2) bound), ``claims``
(numeric checks of the six claims against ``disentangled``), ``report``.
See docs/theory.md.
"""
