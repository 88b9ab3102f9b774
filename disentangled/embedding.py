"""Random-embedding variant (near-orthogonal Gaussian embeddings, as in Bietti et al.).

Every basis vector z (tokens, positions and the remapped ebar vectors) is replaced by a
random vector e_z ~ N(0, I/d) in R^d, independently; the rows of ``E`` (dim, d) are these
vectors, and an input with basis coordinates x becomes E^T x.

* Key-query: a d x d matrix W acts on basis coordinates as W_eff = E W E^T.  Basis-coordinate
  matrices M (W^0, G1, W^0 + eta G1) are mapped into R^{d x d} as W = E^T M E
  (= sum_ij M_ij e_i e_j^T), so W_eff = Gm M Gm with the Gram matrix Gm = E E^T.  Only
  dim x dim matrices are ever formed; ``embed_matrix`` builds the d x d W on request.
* Value/readout: W_OV is a fixed d x d matrix with i.i.d. N(0, 1/d) entries (a random map
  to a new, near-orthogonal subspace), u_m = W_OV e_{n_m}, and the MLP reads number m of
  an input xi in R^d as <u_m, W_OV xi>.  On basis coordinates this is the readout matrix
  R[m, z] = <W_OV e_{n_m}, W_OV e_z> = (Y^T Y)[n_m, z] with Y = W_OV E^T (d, dim): the
  identity on the ``n{m}`` columns plus O(1/sqrt d) cross-talk from every component.  The
  readout depends on W_OV only through Y, whose rows are i.i.d. N(0, Gm/d) given E, so Y is
  drawn directly as Z Gm^{1/2} / sqrt(d) with Z standard normal (d, dim): exactly the law of
  W_OV E^T, in O(d dim^2) instead of O(d^2 dim) time (d up to 10^5 is cheap).

As d -> infinity, Gm -> I and R -> [I_p 0], and the orthogonal model is recovered.
"""

from __future__ import annotations

import torch

from .basis import Basis
from .config import SimConfig
from .fast import Geometry


class RandomGeometry(Geometry):
    """Gaussian embeddings of dimension ``d``, seeded by ``seed`` (torch.Generator).

    The key-query parameter handled by ``effective_W`` is the basis-coordinate pre-image M
    of W = E^T M E (see module docstring); gradients in M are gradients in W_eff."""

    def __init__(self, cfg: SimConfig, d: int, seed: int = 0, ov_seed: int | None = None):
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d={d!r}: must be an integer >= 1")
        basis = Basis.from_config(cfg)
        self.d = d
        gen = torch.Generator().manual_seed(seed)
        self.E = torch.randn((basis.dim, d), generator=gen, dtype=torch.float64) / d**0.5
        self.gram = self.E @ self.E.T
        # Y = W_OV E^T: rows i.i.d. N(0, Gm / d) given E
        evals, evecs = torch.linalg.eigh(self.gram)
        sqrt_gram = evecs @ torch.diag(evals.clamp(min=0).sqrt()) @ evecs.T
        gen_ov = torch.Generator().manual_seed(seed + 1_000_003 if ov_seed is None else ov_seed)
        Z = torch.randn((d, basis.dim), generator=gen_ov, dtype=torch.float64)
        Y = Z @ sqrt_gram / d**0.5
        self.readout = (Y.T @ Y)[: cfg.p]  # R[m, z] = <W_OV e_{n_m}, W_OV e_z>

    def effective_W(self, M: torch.Tensor) -> torch.Tensor:
        """W_eff = E (E^T M E) E^T = Gm M Gm."""
        return self.gram @ M @ self.gram

    def embed_matrix(self, M: torch.Tensor) -> torch.Tensor:
        """The d x d key-query matrix W = E^T M E."""
        return self.E.T @ M @ self.E


class ReadoutOnly(Geometry):
    """W acts on basis coordinates unchanged; numbers are read through ``readout``."""

    def __init__(self, readout: torch.Tensor):
        self.readout = readout
