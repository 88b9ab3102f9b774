"""Multi-head attention's latent codes (seed 003, docs/heads.md): for a query position q and a
key k, the code z = a[:, q, k] is the heads' attention weights (one number per head), which
chooses the linear map sum_h z_h W_O[h] W_V[h] applied to x_k. Here, at the answer's query
`=`, every layer's codes to every key are one feature vector per sequence, and:

    extract.answer_codes(model, tokens)        # codes [B, layers, heads, L] and the logits
    probe.probe_forms(...)                     # (a) a linear probe for the sequence's form,
                                               #     trained on trained forms, scored on
                                               #     held-out compositions, with controls
    structure.code_structure(...)              # (b) a 2-d view, nearest-centroid, silhouette
    timeline.codes_over_training(...)          # (c) the probe at every snapshot, the spikes
    run_codes.codes_of_run(run_dir, ...)       # all of them for one run
    run_codes.codes_of_runs([...])             # and over runs (seeds), by variant

`python -m empirical codes RUN [RUN ...]` (empirical.cli.codes) writes them.
"""

__all__ = ["extract", "options", "plots", "probe", "report", "run_codes", "structure",
           "timeline"]  # fmt: skip
