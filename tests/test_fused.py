"""G runs fused into one model (initlib.fused) equal the same G runs trained alone: per-step
losses, final weights and BatchNorm statistics, for every optimizer, with different sigma_w,
seeds, learning rates, L2 and decay in one group, and with one run diverging while the others
go on. The runs alone use torch's own SGD, Adam and AdamW and the reference Muon: the one
optimizer implementation (initlib.optim.RunsOptimizer) is checked against them here. In
float64, so that the tolerance (relative 1e-9) is about the update, not rounding: grouped and
plain convolutions round differently."""
import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from initlib.config import MUON_AUX_LR_RATIO
from initlib.data import epoch_order, load_cifar10
from initlib.fused import fuse, fused_input, fused_loss, param_roles
from initlib.models import build_model, head_and_stem
from initlib.optim import RunsOptimizer, add_l2_, muon_update

RTOL = 1e-9
SIGMAS, SEEDS = (0.5, 1.0, 2.5), (0, 1, 2)
LRS = {"sgd": (0.05, 0.1, 0.02), "momentum": (0.01, 0.02, 0.005), "adam": (1e-3, 2e-3, 5e-4),
       "adamw": (1e-3, 2e-3, 5e-4), "muon": (0.02, 0.01, 0.03)}
L2S, WDS = (0.0, 1e-3, 5e-3), (0.0, 0.1, 0.05)


@pytest.fixture(scope="module")
def data():
    return load_cifar10(n_train=100, n_val=10, n_test=10)


def batches(data, seed, steps, b=16):
    """Run ``seed``'s first ``steps`` minibatches (its own data order), as float64."""
    n, out, epoch = len(data.train), [], 1
    while len(out) < steps:
        order = epoch_order(n, seed, epoch, "cpu")
        for s in range(0, n, b):
            if len(out) < steps and len(order[s:s + b]) == b:
                idx = order[s:s + b]
                out.append((data.normalize(data.train.x[idx], torch.float64), data.train.y[idx]))
        epoch += 1
    return out


class ReferenceMuon:
    """The reference Muon (github.com/KellerJordan/Muon) on one plain model: hidden kernels by
    optim.muon_update, one at a time; the stem, head and the rest by torch's AdamW."""

    def __init__(self, model, lr, wd):
        stem, head = head_and_stem(model)
        self.hidden = [p for p in model.parameters()
                       if p.ndim >= 2 and p is not stem.weight and p is not head.weight]
        ids = {id(p) for p in self.hidden}
        self.bufs = [torch.zeros_like(p) for p in self.hidden]
        self.lr, self.wd = lr, wd
        self.aux = torch.optim.AdamW([p for p in model.parameters() if id(p) not in ids],
                                     lr=lr * MUON_AUX_LR_RATIO, weight_decay=wd)

    def zero_grad(self):
        self.aux.zero_grad()
        for p in self.hidden:
            p.grad = None

    @torch.no_grad()
    def step(self):
        for p, buf in zip(self.hidden, self.bufs):
            p.mul_(1 - self.lr * self.wd).sub_(self.lr * muon_update(p.grad, buf, 0.95))
        self.aux.step()


def reference_optimizer(name, model, lr, wd):
    """torch's own optimizers (and the reference Muon): what RunsOptimizer must equal."""
    p = list(model.parameters())
    return {"sgd": lambda: torch.optim.SGD(p, lr=lr),
            "momentum": lambda: torch.optim.SGD(p, lr=lr, momentum=0.9),
            "adam": lambda: torch.optim.Adam(p, lr=lr),
            "adamw": lambda: torch.optim.AdamW(p, lr=lr, weight_decay=wd),
            "muon": lambda: ReferenceMuon(model, lr, wd)}[name]()


def alone(name, model, lr, l2, wd, steps):
    opt = reference_optimizer(name, model, lr, wd)
    losses = []
    for x, y in steps:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.grad.add_(l2 * p)  # explicit L2, written out
        opt.step()
        losses.append(loss.item())
    return losses


def together(name, models, lrs, l2s, wds, per_run_steps):
    fused = fuse(copy.deepcopy(models))
    wds = wds if name in ("adamw", "muon") else None
    opt = RunsOptimizer(name, param_roles(fused, name), len(models), lrs, wds,
                        [lr * MUON_AUX_LR_RATIO for lr in lrs])
    params = list(fused.parameters())
    losses = []
    for step in zip(*per_run_steps):
        x = fused_input([s[0] for s in step])
        y = torch.stack([s[1] for s in step], dim=1)
        per_run = fused_loss(fused(x), y, reduction="none")
        opt.zero_grad()
        per_run.sum().backward()
        add_l2_(params, torch.tensor(l2s, dtype=torch.float64))
        opt.step()
        losses.append(per_run.detach().tolist())
    return fused, np.array(losses)


# every optimizer on ResNet-9; the He ResNet (option-A shortcuts, linear bias) with two
@pytest.mark.parametrize("arch,width,name", [("resnet9", 0.125, n) for n in LRS]
                         + [("resnet20", 0.25, "sgd"), ("resnet20", 0.25, "muon")])
def test_fused_runs_equal_runs_alone(data, name, arch, width):
    models = [build_model(arch, width=width, sigma_w=s, seed=seed).double() for s, seed in zip(SIGMAS, SEEDS)]
    steps = [batches(data, seed, 4) for seed in SEEDS]
    fused, fused_losses = together(name, models, LRS[name], L2S, WDS, steps)
    for g, m in enumerate(models):
        ref = alone(name, m, LRS[name][g], L2S[g], WDS[g], steps[g])
        np.testing.assert_allclose(fused_losses[:, g], ref, rtol=RTOL, err_msg=f"{name} run {g}")
    # final weights and BatchNorm statistics, run by run, in module order
    fused_params = list(fused.parameters())
    for g, m in enumerate(models):
        for fp, p in zip(fused_params, m.parameters()):
            np.testing.assert_allclose(fp[g].detach().reshape(p.shape).numpy(), p.detach().numpy(),
                                       rtol=1e-7, atol=1e-12)
        fb = [b for n, b in fused.named_buffers() if n.endswith("running_mean")]
        mb = [b for n, b in m.named_buffers() if n.endswith("running_mean")]
        for f, b in zip(fb, mb):
            np.testing.assert_allclose(f.reshape(len(models), -1)[g].numpy(), b.numpy(), rtol=1e-7, atol=1e-12)


def test_a_diverging_run_leaves_the_others_alone(data):
    lrs = (0.05, 1e30, 0.1)  # run 1 diverges (BN nets survive lr 1e12, not 1e30 at sigma_w 2.5)
    models = [build_model("resnet9", width=0.125, sigma_w=s, seed=seed).double()
              for s, seed in zip((1.0, 2.5, 0.5), SEEDS)]
    steps = [batches(data, seed, 6) for seed in SEEDS]
    _, losses = together("sgd", models, lrs, (0.0,) * 3, None, steps)
    assert np.nanmax(np.where(np.isfinite(losses[:, 1]), losses[:, 1], np.inf)) > 1e10  # exploded
    for g in (0, 2):
        np.testing.assert_allclose(losses[:, g], alone("sgd", models[g], lrs[g], 0.0, 0.0, steps[g]), rtol=RTOL)
