"""BatchNorm statistics that belong to the weights being evaluated ("precise BN").

In eval mode a BatchNorm layer normalises with the running averages it accumulated during
training: an exponential average (momentum 0.1) over the last few dozen minibatches, i.e. over
*earlier weights*. When the weights turn fast (for BatchNorm's scale-invariant kernels the angle
of one SGD step is of order lr / ||W||^2: small sigma_w, narrow nets), those averages belong to
another network, and every eval-mode number (validation loss, which selects the checkpoint; test
accuracy; train accuracy, which defines tau_interp) is read through that lag.

Wu & Johnson (2021), "Rethinking 'Batch' in BatchNorm", section 3 ("precise BN"): with the weights
frozen, recompute the population statistics from 10^3-10^4 training images. That is
:func:`recompute_bn_stats_`: each BatchNorm's statistics are the equal-weight average of the
per-batch statistics over a fixed set of training images (the cumulative average of
``torch.optim.swa_utils.update_bn``, written with an explicit per-batch momentum 1/(k+1) so that
it works for the fused runs' BatchNorm too), augmentation off, the model back in its mode after.

The image set is fixed (:func:`precise_bn_index`: the same images every epoch and for every run
on one split), so the result is deterministic. Run key ``bn_stats``: ``precise`` or ``running``
(the statistics as training left them). The default and its reason: initlib.config.
"""
from __future__ import annotations

import torch
from torch import nn

BN_STATS = ("running", "precise")
# Wu & Johnson: 10^3-10^4 images suffice; 2,000 cost about 13% of a 5,000-image training epoch
# on CPU (forward passes only), measured in bench/bn_stats_pilot.md.
PRECISE_BN_IMAGES = 2000
# 250 images per batch: 0.77x the time of 500 on CPU (bench/epoch_cost.md); the average of
# per-batch variances is then 1/250 of a variance below the population's (Wu & Johnson, sec. 3).
PRECISE_BN_BATCH = 250
PRECISE_BN_SEED = 0


def precise_bn_index(n_train: int, n_images: int = PRECISE_BN_IMAGES) -> torch.Tensor:
    """The training images (positions in the train split) whose statistics are recomputed:
    the first ``n_images`` of a fixed permutation (all of them when the split is smaller)."""
    order = torch.randperm(n_train, generator=torch.Generator().manual_seed(PRECISE_BN_SEED))
    return order[:min(n_images, n_train)]


def batchnorms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


@torch.no_grad()
def recompute_bn_stats_(model: nn.Module, batches) -> nn.Module:
    """Replace every BatchNorm's running mean and variance by the average, with equal weights,
    of its per-batch statistics over ``batches`` (an iterable of model inputs), the weights
    untouched. The model's mode (train/eval) and each layer's momentum are restored."""
    bns = batchnorms(model)
    if not bns:
        return model
    momenta, was_training = [m.momentum for m in bns], model.training
    for m in bns:
        m.reset_running_stats()
    model.train()
    try:
        for k, x in enumerate(batches):
            for m in bns:
                m.momentum = 1.0 / (k + 1)   # running <- running + (batch - running) / (k + 1)
            model(x)
    finally:
        for m, mom in zip(bns, momenta):
            m.momentum = mom
        model.train(was_training)
    return model


def bn_buffers(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every BatchNorm buffer (running mean, variance, batch count)."""
    return {f"{i}.{k}": v.clone() for i, m in enumerate(batchnorms(model))
            for k, v in m.named_buffers(recurse=False)}


@torch.no_grad()
def load_bn_buffers_(model: nn.Module, saved: dict[str, torch.Tensor]) -> None:
    for i, m in enumerate(batchnorms(model)):
        for k, v in m.named_buffers(recurse=False):
            v.copy_(saved[f"{i}.{k}"])
