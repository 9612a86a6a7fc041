"""The paper's forgetting clocks (claim 6 of ../shared/PAPER.md).

"Forgetting is governed by accumulated 'clocks', not epochs (k runs over optimizer steps,
eta_k the step's learning rate, b the batch size, lambda the L2 coefficient):

- T_SGD = (1/b) * sum_k eta_k^2 (finite-step minibatch noise),
- T_L2 = lambda * sum_k eta_k (explicit norm decay),
- T_adapt = sum_k eta_k (adaptive preconditioning)."

Check against the paper: constant eta = 1e-3, b = 128, 40k examples (313 steps per epoch)
for 300 epochs gives T_SGD = 93,900 * 1e-6 / 128 = 7.3e-4, as reported.
"""
from __future__ import annotations

import numpy as np

from .config import LAST_BATCH

CLOCKS = ("T_SGD", "T_L2", "T_adapt")


def steps_per_epoch(n_train: int, batch_size: int, last_batch: str = "keep") -> int:
    """Optimizer steps in one pass over n_train images at batch size b: ceil(n / b) when the
    last, smaller batch is kept (the paper's 40,000 at b = 128: 313), floor(n / b) when it is
    dropped. Every step counts in the clocks, the smaller last one as a whole step."""
    if last_batch not in LAST_BATCH:
        raise ValueError(f"last_batch must be one of {LAST_BATCH}, got {last_batch!r}")
    return -(-n_train // batch_size) if last_batch == "keep" else n_train // batch_size


def cumulative_clocks(lrs, batch_size: int, l2: float, steps_per_epoch: int) -> dict[str, np.ndarray]:
    """Each clock at the end of every epoch (arrays of length len(lrs) // steps_per_epoch),
    from the per-step learning rates ``lrs``: T_SGD = (1/b) sum eta_k^2, T_L2 = lambda sum
    eta_k, T_adapt = sum eta_k, summed over the steps up to each epoch's end."""
    lrs = np.asarray(lrs, dtype=np.float64)
    ends = np.arange(steps_per_epoch, len(lrs) + 1, steps_per_epoch)
    c_eta, c_eta2 = np.cumsum(lrs), np.cumsum(lrs ** 2)
    return {"T_SGD": c_eta2[ends - 1] / batch_size,
            "T_L2": l2 * c_eta[ends - 1],
            "T_adapt": c_eta[ends - 1]}
