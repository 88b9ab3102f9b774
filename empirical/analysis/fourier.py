"""Fourier structure of the layer-2 MLP (paper Section 5.1 "Emergence of Fourier features",
Appendix A Figure 11).

Every neuron's pre-activation on the isolated OV-MLP input over all operand pairs (as in
`ov_mlp.isolated_ov_mlp`) is fitted by least squares, for each frequency k = 1..p//2
(w_k = 2 pi k / p), to Gromov's form c + A_x cos(w_k x + phi_x) + A_y cos(w_k y + phi_y). On
the full p x p grid the basis is orthogonal, so the fit is read off the discrete Fourier
transforms of the row and column means; R^2 = explained / total sum of squares; the best k is
the neuron's dominant frequency. Key frequencies: dominant for at least `min_share` of the
neurons with R^2 >= `r2_threshold`. More: docs/analysis.md.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from empirical.analysis.ov_mlp import ov_mlp_input
from empirical.task.config import TaskConfig


@dataclass
class FourierFit:
    p: int
    r2: np.ndarray  # [d_mlp] best R^2 per neuron
    freq: np.ndarray  # [d_mlp] dominant frequency k (1..p//2)
    r2_all: np.ndarray  # [d_mlp, p//2] R^2 at every frequency
    amp_x: np.ndarray
    amp_y: np.ndarray
    phase_x: np.ndarray
    phase_y: np.ndarray
    const: np.ndarray
    variance: np.ndarray  # [d_mlp] variance of the pre-activation over the grid
    key_frequencies: list[int]
    freq_counts: dict[int, int]  # dominant frequency -> number of well-fitted neurons
    r2_threshold: float
    best_neuron: int
    pre: np.ndarray = field(repr=False)  # [p, p] the best neuron's pre-activations
    fitted: np.ndarray = field(repr=False)  # [p, p] its fitted Gromov form

    def grid(self, neuron: int) -> np.ndarray:
        """The fitted form of `neuron` on the p x p grid."""
        x = np.arange(self.p)
        w = 2 * math.pi * self.freq[neuron] / self.p
        fx = self.amp_x[neuron] * np.cos(w * x + self.phase_x[neuron])
        fy = self.amp_y[neuron] * np.cos(w * x + self.phase_y[neuron])
        return self.const[neuron] + fx[:, None] + fy[None, :]

    def summary(self) -> dict:
        active = self.variance > 1e-6 * max(float(self.variance.max()), 1e-30)
        n_active = int(active.sum())
        well = active & (self.r2 >= self.r2_threshold)
        return {
            "n_neurons": int(len(self.r2)),
            "n_active": n_active,
            "r2_mean_active": float(self.r2[active].mean()) if n_active else 0.0,
            "r2_median_active": float(np.median(self.r2[active])) if n_active else 0.0,
            "frac_r2_above_0.9": float((self.r2[active] >= 0.9).mean()) if n_active else 0.0,
            "frac_r2_above_threshold": float(well.sum() / max(n_active, 1)),
            "r2_threshold": self.r2_threshold,
            "key_frequencies": list(self.key_frequencies),
            "freq_counts": {str(k): v for k, v in sorted(self.freq_counts.items())},
            "best_neuron": int(self.best_neuron),
            "best_neuron_r2": float(self.r2[self.best_neuron]),
            "best_neuron_freq": int(self.freq[self.best_neuron]),
            "best_neuron_amp_x": float(self.amp_x[self.best_neuron]),
            "best_neuron_amp_y": float(self.amp_y[self.best_neuron]),
        }


def fit_gromov(pre: np.ndarray, r2_threshold: float = 0.5, min_share: float = 0.05) -> FourierFit:
    """Fit every neuron of `pre` [p, p, n] (pre-activation over (x, y)) to Gromov's form."""
    pre = np.asarray(pre, dtype=np.float64)
    p = pre.shape[0]
    n_freq = p // 2
    mean = pre.mean(axis=(0, 1))  # [n]
    total = ((pre - mean) ** 2).sum(axis=(0, 1))  # [n]
    mx = pre.mean(axis=1)  # [p, n] mean over y: function of x
    my = pre.mean(axis=0)  # [p, n]
    Fx = np.fft.rfft(mx, axis=0)[1 : n_freq + 1]  # [n_freq, n]
    Fy = np.fft.rfft(my, axis=0)[1 : n_freq + 1]
    ks = np.arange(1, n_freq + 1)
    # energy of one frequency on the grid: p * 2|F|^2 / p = 2|F|^2 (|F|^2 / p * p at k = p/2)
    weight = np.where((p % 2 == 0) & (ks == p // 2), 1.0, 2.0)[:, None]
    explained = weight * (np.abs(Fx) ** 2 + np.abs(Fy) ** 2)
    safe_total = np.where(total > 0, total, 1.0)
    r2_all = np.where(total > 0, explained / safe_total, 0.0).T  # [n, n_freq]
    best = r2_all.argmax(axis=1)
    rows = np.arange(pre.shape[2])
    freq = ks[best]
    scale = (weight[best, 0]) / p
    amp_x = scale * np.abs(Fx[best, rows])
    amp_y = scale * np.abs(Fy[best, rows])
    phase_x = np.angle(Fx[best, rows])
    phase_y = np.angle(Fy[best, rows])
    r2 = r2_all[rows, best]
    variance = total / (p * p)
    active = variance > 1e-6 * max(float(variance.max()), 1e-30)
    well = active & (r2 >= r2_threshold)
    counts = dict(Counter(int(k) for k in freq[well]))
    n_well = int(well.sum())
    key = sorted(
        (k for k, c in counts.items() if c >= max(2, min_share * n_well)),
        key=lambda k: -counts[k],
    )
    # best-fitting neuron among the active ones, ties to the larger variance
    score = np.where(active, r2, -1.0) + 1e-9 * variance / max(float(variance.max()), 1e-30)
    best_neuron = int(score.argmax())
    fit = FourierFit(
        p=p, r2=r2, freq=freq, r2_all=r2_all, amp_x=amp_x, amp_y=amp_y, phase_x=phase_x,
        phase_y=phase_y, const=mean, variance=variance, key_frequencies=key, freq_counts=counts,
        r2_threshold=r2_threshold, best_neuron=best_neuron, pre=pre[:, :, best_neuron],
        fitted=np.zeros((p, p)),
    )  # fmt: skip
    fit.fitted = fit.grid(best_neuron)
    return fit


@torch.no_grad()
def isolated_preactivations(model, task: TaskConfig) -> np.ndarray:
    """Layer-2 MLP pre-activations on the isolated OV-MLP input, [p, p, d_mlp]."""
    v = ov_mlp_input(model, task.p)
    return (v @ model.W_in).double().cpu().numpy()


@torch.no_grad()
def grid_preactivations(model, prefix: torch.Tensor, p: int, chunk: int = 4096) -> np.ndarray:
    """The full model's last-MLP pre-activations at `=` (every neuron) on the 0-var sequence
    `prefix` (one sequence of L tokens) with its operands at L-3, L-2 set to every pair (x, y),
    [p, p, d_mlp]; any depth."""
    L = prefix.shape[-1]
    x, y = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    tokens = prefix.to("cpu").reshape(1, L).long().repeat(p * p, 1)
    tokens[:, L - 3] = x.reshape(-1)
    tokens[:, L - 2] = y.reshape(-1)
    name = f"blocks.{model.cfg.n_layers - 1}.mlp.hook_pre"
    pre = []
    for part in tokens.split(chunk):
        _, cache = model.run_with_cache(part.to(model.device), names_filter=lambda n: n == name)
        pre.append(cache[name][:, -1].double().cpu())
    return torch.cat(pre).reshape(p, p, -1).numpy()


def model_preactivations(model, task: TaskConfig, prefix: torch.Tensor, neuron: int):
    """The full model's pre-activation of `neuron` at `=` on the 0-var sequences `prefix`
    with operands (x, y) for all pairs, [p, p] (prefix: one sequence of L tokens)."""
    return np.ascontiguousarray(grid_preactivations(model, prefix, task.p)[:, :, neuron])


def fourier_analysis(model, task: TaskConfig, prefix: torch.Tensor | None = None, **kw) -> dict:
    """Fit every neuron (isolated OV-MLP input); with `prefix` (a 0-var sequence) also the
    full model's pre-activations of the best neuron and the R^2 of its fit on them.
    Returns {"fit": FourierFit, "summary": {...}, "model_pre": [p, p] or None}."""
    fit = fit_gromov(isolated_preactivations(model, task), **kw)
    summary = fit.summary()
    model_pre = None
    if prefix is not None:
        model_pre = model_preactivations(model, task, prefix, fit.best_neuron)
        one = fit_gromov(model_pre[:, :, None], r2_threshold=fit.r2_threshold)
        summary["best_neuron_r2_full_model"] = float(one.r2_all[0, fit.freq[fit.best_neuron] - 1])
        summary["best_neuron_r2_full_model_best_freq"] = float(one.r2[0])
    return {"fit": fit, "summary": summary, "model_pre": model_pre}
