"""Mechanistic analysis of a trained assign-and-add model (paper Sections 5-6, Appendix B).

Each analysis is a plain function of a loaded model and the task config:

    from empirical.analysis import *
    data = make_probe_data(task, seed=0)                  # fixed probe sequences, built once
    ov_mlp_cosine(model, task, data.test)                 # Figure 5
    same_addition_cosine(model, task, data.test)          # Figure 5a
    isolated_ov_mlp(model, task)                          # exact OV-MLP subnetwork accuracy
    answer_probes(model, task, data.train, data.test)     # probes before / after the MLP
    fourier_analysis(model, task)                         # Figure 11, key frequencies
    qk1_embedding_scores(model, task)                     # Figure 6
    qk1_positional_preference(model, task)                # Figure 7a
    qk2_ov1_identity(model, task)                         # Figure 7b
    attention_examples(model, task, data.test)            # Figure 4
    progress_measures(model, data)                        # the seven measures of Appendix B,
                                                          # ours and the authors' (NAME@authors)
    progress_over_training(run_dir, data)                 # over every snapshot (Figures 9, 12)
    compare_first_spike(run_dir, data, (5301, 5401))      # Figure 8: before / after a spike
    compare_second_spike(run_dir, data, (14501, 16001))   # Figures 9c / 9d
    analyze_run(run_dir)                                  # all of it, files under run_dir/analysis

Figures: `empirical.analysis.plots`. Every definition: docs/analysis.md. The public names are
imported on first use (disentangled.lazy_exports), so importing this selects no matplotlib
backend.
"""

from disentangled.lazy_exports import lazy_exports

__all__ = [
    "ALL_MEASURES", "ALL_MEASURE_NAMES", "AUTHORS_MEASURES", "AUTHORS_MEASURE_NAMES",
    "AuthorsBatches", "ROUTING_MEASURES", "authors_batches", "authors_measures",
    "compare_first_spike", "compare_second_spike", "default_compare_steps", "definition_agreement",
    "rotate_residual", "window_levels", "MEASURES", "MEASURE_NAMES", "FourierFit", "LightForward",
    "ProbeData", "ProbeResult", "ProgressHistory", "analyze_model", "analyze_run", "answer_probes",
    "attention_examples", "attention_summary", "attn_l1_equal_to_operands", "attn_l1_num_to_prev",
    "attn_l2_equal_to_values", "crossing_steps", "fit_gromov", "fourier_analysis",
    "isolated_ov_mlp", "light_forward", "make_probe_data", "ov2_mlp2_accuracy", "ov_matrix",
    "ov_mlp_cosine", "pick_examples", "probe_l1_var_from_num", "progress_measures",
    "progress_over_training", "qk1_embedding_scores", "qk1_num_to_prev_var",
    "qk1_positional_preference", "qk2_ov1_identity", "qk2_ov1_var_identity", "qk_matrix",
    "reference_model", "same_addition_cosine", "second_spike_scores", "train_linear_probe",
]  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.analysis.attention": [
            "attention_examples", "attention_summary", "pick_examples",
        ],
        "empirical.analysis.authors": [
            "AUTHORS_MEASURE_NAMES", "AUTHORS_MEASURES", "authors_measures",
        ],
        "empirical.analysis.common": ["LightForward", "light_forward"],
        "empirical.analysis.probe_data": [
            "AuthorsBatches", "ProbeData", "authors_batches", "make_probe_data",
        ],
        "empirical.analysis.fourier": ["FourierFit", "fit_gromov", "fourier_analysis"],
        "empirical.analysis.ov_mlp": [
            "isolated_ov_mlp", "ov2_mlp2_accuracy", "ov_mlp_cosine", "same_addition_cosine",
        ],
        "empirical.analysis.probes": ["ProbeResult", "answer_probes", "train_linear_probe"],
        "empirical.analysis.progress": [
            "ALL_MEASURE_NAMES", "ALL_MEASURES", "MEASURE_NAMES", "MEASURES", "ROUTING_MEASURES",
            "ProgressHistory", "attn_l1_equal_to_operands", "attn_l1_num_to_prev",
            "attn_l2_equal_to_values", "crossing_steps", "definition_agreement",
            "probe_l1_var_from_num", "progress_measures", "progress_over_training",
            "second_spike_scores", "window_levels",
        ],
        "empirical.analysis.qk": [
            "qk1_embedding_scores", "qk1_num_to_prev_var", "qk1_positional_preference",
            "qk2_ov1_identity", "qk2_ov1_var_identity",
        ],
        "empirical.analysis.reference": ["reference_model", "rotate_residual"],
        "empirical.analysis.spikes": [
            "compare_first_spike", "compare_second_spike", "default_compare_steps",
        ],
        "empirical.model.circuits": ["ov_matrix", "qk_matrix"],
        # these pull in matplotlib: imported only when asked for
        "empirical.analysis.model_analysis": ["analyze_model"],
        "empirical.analysis.run_analysis": ["analyze_run"],
    },
)  # fmt: skip
