"""The race's new test set (issue #45, item 1e; docs/race.md, "The new test set"): where the
race and the tau-free rule disagree (inputs trained, no 2-var in training), at (p, K, beta)
the fit did not use, the inputs' rate spanning four orders of magnitude. Its names and the
criterion's predictions were committed before any of it was trained (git log --
empirical/bridge/race/race_new.py docs/results/race_new_predictions.json).

Design, fixed before any of it ran: three settings (p, K, beta) = (7, 2, 4), (5, 3, 3),
(11, 2, 3), none of which the fit half has; layer 1 and the embeddings both trained (plain SGD
at the inputs' rate, W_QK at the ladder's 0.2, 1-var data only, 300 steps, 3 seeds); per
setting ten inputs' rates, geometric from 1/1000 of the criterion's predicted critical rate
to 10 times it (10^(-3 + 4k/9) x, k = 0..9). The predicted critical rate is where
T_mem = tau T_in at the tau fitted on the fit half (tau = 0.00448, from `race --configs
original` at commit 8584f5e): rate tau T_in(rate) / T_mem, with T_mem and T_in(0.01) from the
step-0 gradients (4.02e-6, 8.88e-6 and 9.11e-5). Below it the criterion says "composes", above
it "does not"; the tau-free rule says "does not" everywhere. Any tau the fit half cannot tell
apart, (0, 0.0448), puts the critical rate anywhere below 10 times the one used.

NEW_SET: (name, releases, dotted DynamicsConfig overrides). No torch here.
"""

from __future__ import annotations

INPUTS = ("layer1", "embeddings")
NEW_SET: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=4.02e-09", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=4.02e-09')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=1.12e-08", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=1.12e-08')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=3.11e-08", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=3.11e-08')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=8.66e-08", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=8.66e-08')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=2.41e-07", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=2.41e-07')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=6.71e-07", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=6.71e-07')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=1.87e-06", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=1.87e-06')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=5.19e-06", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=5.19e-06')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=1.44e-05", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=1.44e-05')),
    ("new:layer1+embeddings@p=7,K=2,beta=4,lr=4.02e-05", INPUTS,
     ('theorem.p=7', 'theorem.K=2', 'theorem.beta=4.0', 'sgd.lr=4.02e-05')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=8.88e-09", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=8.88e-09')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=2.47e-08", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=2.47e-08')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=6.88e-08", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=6.88e-08')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=1.91e-07", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=1.91e-07')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=5.32e-07", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=5.32e-07')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=1.48e-06", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=1.48e-06')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=4.12e-06", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=4.12e-06')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=1.15e-05", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=1.15e-05')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=3.19e-05", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=3.19e-05')),
    ("new:layer1+embeddings@p=5,K=3,beta=3,lr=8.88e-05", INPUTS,
     ('theorem.p=5', 'theorem.K=3', 'theorem.beta=3.0', 'sgd.lr=8.88e-05')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=9.11e-08", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=9.11e-08')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=2.53e-07", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=2.53e-07')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=7.05e-07", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=7.05e-07')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=1.96e-06", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=1.96e-06')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=5.46e-06", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=5.46e-06')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=1.52e-05", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=1.52e-05')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=4.23e-05", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=4.23e-05')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=0.000118", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=0.000118')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=0.000327", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=0.000327')),
    ("new:layer1+embeddings@p=11,K=2,beta=3,lr=0.000911", INPUTS,
     ('theorem.p=11', 'theorem.K=2', 'theorem.beta=3.0', 'sgd.lr=0.000911')),
)
