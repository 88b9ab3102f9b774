"""Linear probes: multinomial logistic regression in torch (L-BFGS), trained on one split,
scored on another.

    res = train_linear_probe(X_train, y_train, X_test, y_test, n_classes)
    res.test_acc, res.train_acc

`answer_probes(model, task, train, test)`: can the answer be read linearly from the residual
stream at `=` before the layer-2 MLP (blocks.1.hook_resid_mid) and after it
(blocks.1.hook_resid_post)? The paper (Section 5.1): before fails, after succeeds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from empirical.analysis.common import last_position_hooks
from empirical.task.batch import Batch
from empirical.task.config import TaskConfig


@dataclass
class ProbeResult:
    train_acc: float
    test_acc: float
    n_train: int
    n_test: int
    n_classes: int
    test_pred: Tensor | None = field(default=None, repr=False)  # predicted class per test row

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("test_pred")
        return d


def train_linear_probe(
    X_train: Tensor,
    y_train: Tensor,
    X_test: Tensor,
    y_test: Tensor,
    n_classes: int,
    steps: int = 100,
    weight_decay: float = 1e-3,
) -> ProbeResult:
    """Multinomial logistic regression on standardised features (train split's mean and
    std), L2 penalty `weight_decay * |W|^2`, `steps` L-BFGS iterations from zero weights
    (deterministic). Returns train and test accuracy."""
    X_train, X_test = X_train.detach().double(), X_test.detach().double()
    mean = X_train.mean(0)
    std = X_train.std(0).clamp_min(1e-8)
    Xtr = (X_train - mean) / std
    Xte = (X_test - mean) / std
    ytr, yte = y_train.long().to(Xtr.device), y_test.long().to(Xtr.device)
    W = torch.zeros(Xtr.shape[1], n_classes, dtype=Xtr.dtype, requires_grad=True)
    b = torch.zeros(n_classes, dtype=Xtr.dtype, requires_grad=True)
    opt = torch.optim.LBFGS(
        [W, b], lr=1.0, max_iter=steps, history_size=20, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(Xtr @ W + b, ytr) + weight_decay * (W * W).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    with torch.no_grad():
        train_acc = ((Xtr @ W + b).argmax(-1) == ytr).double().mean().item()
        pred = (Xte @ W + b).argmax(-1)
        test_acc = (pred == yte).double().mean().item() if len(yte) else 0.0
    return ProbeResult(train_acc, test_acc, len(ytr), len(yte), n_classes, pred)


def resid_at_answer(model, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """(resid_mid, resid_post) of layer 2 at the last position, [n, d_model] each."""
    names = ("blocks.1.hook_resid_mid", "blocks.1.hook_resid_post")
    return last_position_hooks(model, tokens.to(model.device), names)


def answer_probes(
    model, task: TaskConfig, train: Batch, test: Batch, steps: int = 100
) -> dict[str, dict]:
    """Probe the answer (p classes) from resid_mid (before the layer-2 MLP) and resid_post
    (after it) at `=`: trained on `train`, scored on `test` (overall and per kind)."""
    mid_tr, post_tr = resid_at_answer(model, train.tokens)
    mid_te, post_te = resid_at_answer(model, test.tokens)
    model_correct = (post_te @ model.W_U).argmax(-1) == test.labels.to(post_te.device)
    out = {"model_test_acc": model_correct.double().mean().item()}
    for name, Xtr, Xte in (("resid_mid", mid_tr, mid_te), ("resid_post", post_tr, post_te)):
        res = train_linear_probe(Xtr, train.labels, Xte, test.labels, task.p, steps=steps)
        d = res.to_dict()
        correct = res.test_pred.cpu() == test.labels.cpu()
        n_vars = test.n_vars.cpu()
        d["test_acc_by_kind"] = {
            f"{k}var": correct[n_vars == k].double().mean().item()
            for k in (0, 1, 2)
            if bool((n_vars == k).any())
        }
        out[name] = d
    out["note"] = (
        "multinomial logistic regression on the layer-2 residual at `=`; resid_mid is the "
        "MLP's input (blocks.1.hook_resid_mid), resid_post its output plus skip"
    )
    return out
