"""What one run contributes to its population, read from its summary.json, metrics.jsonl,
analysis.json and compare-qk output: per paper check the number behind it (`claim_values`),
the jump steps, the robust final accuracy, its late collapses, and the first spike's
theory-vs-run cosines (`spike_numbers`). The claims are judged by paper_checks alone.
"""

from __future__ import annotations

import math

from empirical.experiments.paper_checks import paper_check_rows

ROBUST_WINDOW = 2000  # steps: the final accuracy is the mean of the evaluations in the last ...
REACHED = 0.99  # a late collapse: a set that reached this ...
COLLAPSED = 0.95  # ... and later fell below this
KINDS = ("0var", "1var", "2var")

FIRST_SPIKE_CLAIM = "first spike: variable routing"
SECOND_SPIKE_CLAIM = "second spike: var-restricted sets"
# a spike claim is two claims in a population: the spike comes (its presence), and it comes
# at the paper's steps (its timing); paper_checks' "no (timing)" holds the first, not the second
PRESENT, TIMING = ", present", ", at the paper's steps"
ROBUST_SUFFIX = ", robust final"
THEORY_CLAIMS = {
    "whole": "first spike's layer-2 QK update beyond its sign-randomised null (whole block)",
    "barv": "first spike's layer-2 QK update beyond its sign-randomised null (bar_v block)",
}


def is_accuracy_claim(claim: str) -> bool:
    """Whether a paper_check_rows claim is judged on the final accuracies alone."""
    return claim.startswith("> 99% on every ") or claim.endswith("(Section 4)")


def claim_values(summary: dict, analysis: dict | None) -> dict[str, tuple[str, float | None]]:
    """{claim: (what the number is, the number)} for every claim paper_check_rows makes on
    this run: the number behind its verdict (lowest accuracy of a kind, a jump step, a
    cosine, ...), for percentiles in a population."""
    acc = summary.get("final_acc", {}) or {}
    model = (analysis or {}).get("model", {}) or {}
    phases = summary.get("phases", {}) or {}
    jumps = jump_steps(summary)
    out: dict[str, tuple[str, float | None]] = {}
    for claim, *_ in paper_check_rows(summary, analysis or {}):
        value: tuple[str, float | None]
        if claim.startswith("> 99% on every "):
            kind = claim.split()[4]
            names = [n for n in acc if n.startswith(kind + "/")]
            value = (f"lowest {kind} set accuracy", min(acc[n] for n in names) if names else None)
        elif claim.endswith("(Section 4)"):
            name = claim.rsplit(" (", 1)[0]
            value = (f"{name} accuracy", acc.get(name))
        elif claim.startswith("0-var learned first"):
            value = ("step at which 0-var reached 90%", phases.get("zero_var_learned_step"))
        elif claim == FIRST_SPIKE_CLAIM:
            value = ("first jump step", jumps["first"])
        elif claim == SECOND_SPIKE_CLAIM:
            value = ("second jump step", jumps["second"])
        elif claim.startswith("MLP input ~ OV sum"):
            value = ("matched cosine", model.get("ov_mlp_cosine", {}).get("matched_mean"))
        elif claim.startswith("isolated OV-MLP"):
            value = ("isolated OV-MLP accuracy", model.get("isolated_ov_mlp", {}).get("accuracy"))
        elif claim.startswith("MLP neurons fit Gromov"):
            value = ("best neuron R^2", model.get("fourier", {}).get("best_neuron_r2"))
        elif claim.startswith("layer-2 QK on OV'd variables"):
            value = ("identity score", model.get("qk2_ov1_identity", {}).get("identity_score"))
        else:  # a claim added to paper_checks without a number here: counted, no percentile
            value = ("(no number)", None)
        out[claim] = value
    return out


def split_spike_checks(checks: dict) -> dict:
    """`checks` ({claim: (paper, outcome, quantity, value, kind)}) with each spike claim
    replaced by its presence ("yes" for "yes" and "no (timing)") and its timing ("yes" only
    for "yes"), in its place."""
    out = {}
    for claim, (paper, outcome, quantity, value, kind) in checks.items():
        if claim not in (FIRST_SPIKE_CLAIM, SECOND_SPIKE_CLAIM):
            out[claim] = (paper, outcome, quantity, value, kind)
            continue
        present = None if outcome in (None, "-") else (
            "yes" if outcome in ("yes", "no (timing)") else "no")
        timing = None if outcome in (None, "-") else ("yes" if outcome == "yes" else "no")
        out[claim + PRESENT] = ("a spike", present, quantity, value, kind)
        out[claim + TIMING] = (paper, timing, quantity, value, kind)
    return out


def robust_final(records: list[dict], sizes: dict | None = None,
                 window: int = ROBUST_WINDOW) -> dict[str, dict]:  # fmt: skip
    """Per evaluation set: the mean accuracy over the evaluations at steps s with
    last - window < s <= last ("acc"), how many ("n_evals"), and the fewest sequences any of
    them read ("n": its `eval_n`, else the set's size in `sizes`)."""
    if not records:
        return {}
    last = records[-1]["step"]
    window_records = [r for r in records if r["step"] > last - window]
    out = {}
    for name in records[-1]["acc"]:
        vals, ns = [], []
        for r in window_records:
            if name in r.get("acc", {}):
                vals.append(r["acc"][name])
                ns.append((r.get("eval_n") or {}).get(name, (sizes or {}).get(name)))
        if vals:
            known = [n for n in ns if n]
            out[name] = {"acc": sum(vals) / len(vals), "n_evals": len(vals),
                         "n": min(known) if known else None}  # fmt: skip
    return out


def _jump(rise: dict | None) -> int | None:
    if not rise:
        return None
    step = rise.get("jump_end_step")
    return int(step if step is not None else rise["end_step"])


def jump_steps(summary: dict) -> dict[str, int | None]:
    """The step each spike's jump ends at (its largest rise between two evaluations; None: no
    spike detected), from summary.json's phases (empirical.runs.phases)."""
    phases = summary.get("phases", {}) or {}
    return {"first": _jump(phases.get("first_spike")), "second": _jump(phases.get("second_spike"))}


def collapses(records: list[dict], reached: float = REACHED,
              below: float = COLLAPSED) -> list[dict]:  # fmt: skip
    """Every late collapse of an evaluation set: after the set first reached `reached`, an
    evaluation below `below` (the set counts as up again once it is back at `reached`). Each:
    {"set", "reached_step", "collapse_step", "lowest" (the lowest accuracy until it was up
    again, or until the end), "recovered_step" (None: not back at `reached` by the end)}."""
    out = []
    names = list(records[-1]["acc"]) if records else []
    for name in names:
        up_since, fall = None, None
        for r in records:
            a = r.get("acc", {}).get(name)
            if a is None:
                continue
            if fall is not None:
                fall["lowest"] = min(fall["lowest"], a)
                if a >= reached:
                    fall["recovered_step"] = r["step"]
                    out.append(fall)
                    fall, up_since = None, r["step"]
                continue
            if up_since is None:
                if a >= reached:
                    up_since = r["step"]
            elif a < below:
                fall = {"set": name, "reached_step": up_since, "collapse_step": r["step"],
                        "lowest": a, "recovered_step": None}  # fmt: skip
        if fall is not None:
            out.append(fall)
    return out


def spike_numbers(result: dict | None) -> dict | None:
    """From a compare-qk result (compare_qk.json): the `spike1` window's mean cosine of G1 with
    the observed layer-2 QK update (`diff`, headline frame; whole and bar_v block) and its
    sign-randomised null (95%). None when there is no spike1 window with an update."""
    if not result:
        return None
    window = (result.get("windows") or {}).get("spike1")
    if not window or not window.get("updates"):
        return None
    frame = window.get("frame") or result.get("frame") or "dual"
    cos = (window.get("cos") or {}).get(frame, {}).get("diff", {})
    null = (window.get("null95_signs") or {}).get("diff", {})

    def mean(d: dict, sub: str) -> float | None:
        v = (d.get(sub) or {}).get("mean")
        return float(v) if v is not None and math.isfinite(v) else None

    out = {"frame": frame, "updates": window["updates"], "cos_whole": mean(cos, "all"),
           "cos_barv": mean(cos, "barv_barv"), "null_whole": mean(null, "all"),
           "null_barv": mean(null, "barv_barv")}  # fmt: skip
    return out if out["cos_whole"] is not None else None


def theory_outcomes(spike: dict | None) -> dict[str, tuple[str, float | None]]:
    """{theory claim: (holds "yes"/"no", or None when not measured; the cosine)}: whether the
    first spike's update is above its sign-randomised null, per block."""
    out = {}
    for block, claim in THEORY_CLAIMS.items():
        cos = spike.get(f"cos_{block}") if spike else None
        null = spike.get(f"null_{block}") if spike else None
        holds = None if cos is None or null is None else ("yes" if cos > null else "no")
        out[claim] = (holds, cos)
    return out


def robust_rows(summary: dict, robust: dict[str, dict]) -> list[tuple[str, str, str, str]]:
    """paper_check_rows' accuracy claims judged on the robust final accuracy (the mean of the
    last ROBUST_WINDOW steps) instead of the last evaluation: the same definition, another
    reading of "final"; each claim named with ROBUST_SUFFIX."""
    acc = {k: v["acc"] for k, v in robust.items()}
    rows = paper_check_rows({"final_acc": acc}, {})
    return [(c + ROBUST_SUFFIX, p, m, h) for c, p, m, h in rows if is_accuracy_claim(c)]


def robust_values(robust: dict[str, dict]) -> dict[str, tuple[str, float | None]]:
    """claim_values for the robust accuracy claims."""
    acc = {k: v["acc"] for k, v in robust.items()}
    values = claim_values({"final_acc": acc}, {})
    return {c + ROBUST_SUFFIX: (q + " (robust)", v) for c, (q, v) in values.items()
            if is_accuracy_claim(c)}  # fmt: skip
