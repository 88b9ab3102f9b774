"""G1's memory block at the paper's operating point (issue 36, item 1; docs/theory.md, "Other
pieces and the operating point").

Theorem C.1's G1 is derived at W^0 (attention a on each operand, b elsewhere) with orthonormal
ebar. `theory.piece_closed_form.memory_block` evaluates the same expectation at a given
attention at `=` (number operand, variable operand, assigned numbers) and a given Gram matrix
of the ebar vectors. This script reads the trained ebar_u = W_E[v_u] W_V^1 W_O^1 of a run's
snapshot (compare-qk's `ebar_vectors`), takes their Gram matrix normalised to unit diagonal
(the cosines: the theorem's ebar are unit vectors; norms only rescale rows), and prints the
memory block's summary at W^0, at the attention given, and at that attention with that Gram
matrix, and the cosine of each block with W^0's. The theorem's population needs every variable
assigned (2K <= L - 4), so the paper's run (L = 16, K = 12 labels, 1-6 assignments a sequence)
is evaluated at K_seq = 6 assigned variables and the K_seq x K_seq block (c_diag, c_off) is
laid over the 12 labels.

    python scripts/operating_point_g1.py runs/authors --step 5301 --attention 0.41 0.02 0.49
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def _cos(x: np.ndarray, y: np.ndarray) -> float:
    return float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--step", type=int, default=5301)
    ap.add_argument("--attention", type=float, nargs=3, default=(0.41, 0.02, 0.49),
                    metavar=("NUM", "VAR", "ASSIGNED"))  # fmt: skip
    ap.add_argument("--k-seq", type=int, default=6, help="assigned variables a sequence")
    args = ap.parse_args()

    from empirical.bridge.compare_qk.coords import ebar_vectors
    from empirical.runs.load import load_run
    from empirical.runs.rundir import RunDir
    from theory import piece_closed_form as pcf
    from theory.symbols import ab_numeric

    model, _ = load_run(args.run, step=args.step)

    task = RunDir(args.run).read_config().task
    p, K = task.p, task.K
    E = ebar_vectors(model, p, K).numpy()
    gram = E @ E.T
    norms = np.sqrt(np.diag(gram))
    cosines = gram / np.outer(norms, norms)
    ks = args.k_seq

    def over_labels(block_ks: np.ndarray) -> np.ndarray:
        d, o = block_ks[0, 0], block_ks[0, 1]
        return np.full((K, K), o) + (d - o) * np.eye(K)

    a0, b0 = ab_numeric(4.0)
    w0 = over_labels(pcf.memory_block(p, ks, a0, a0, ks * b0))
    op = over_labels(pcf.memory_block(p, ks, *args.attention))
    op_gram = cosines @ op @ cosines
    off = cosines[~np.eye(K, dtype=bool)]
    out = {
        "run": args.run, "step": args.step, "attention_at_eq": list(args.attention), "K_seq": ks,
        "ebar_cosines": {"max_abs_off": float(np.abs(off).max()),
                         "mean_abs_off": float(np.abs(off).mean()),
                         "norms": [float(x) for x in norms]},
        "W0_beta4": pcf.memory_summary(w0),
        "at_attention": pcf.memory_summary(op),
        "attention_and_gram": pcf.memory_summary(op_gram),
        "cos_with_W0": {"attention": _cos(op, w0), "attention_and_gram": _cos(op_gram, w0)},
        "rows_whose_own_key_leads": {
            "attention": int((op.argmax(axis=1) == np.arange(K)).sum()),
            "attention_and_gram": int((op_gram.argmax(axis=1) == np.arange(K)).sum()),
            "of": K},
    }  # fmt: skip
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
