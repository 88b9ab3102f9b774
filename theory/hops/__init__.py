"""Theorem C.1 per hop: the derivations of the two-hop chain model (../shared/spec/chain.md)
that C.1's do not cover, one module per question, with C.1's interface where there is one.

``last_hop`` (G1^(3): five terms, exact polynomials in (a, b); the map from C.1's symbolic G1
without pointers), ``middle_hop`` (the W2 gradient: zero at W3 = W^0, its drive D after one
W3 step), ``claims`` (checks H1-H6 against the simulator, as :mod:`theory.claims`: ``claimN``,
``ALL_CLAIMS`` on a :class:`theory.claims.Point` with hops = 2), ``report`` (the report's
section, as :mod:`theory.report`: ``run_checks``).  The simulator is ``disentangled`` with a
``ChainConfig``.  See docs/theory.md.
"""

__all__ = ["claims", "last_hop", "middle_hop", "report"]
