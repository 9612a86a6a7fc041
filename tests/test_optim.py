import math

import numpy as np
import pytest
import torch
from torch import nn

from initlib.fused import fuse, param_roles
from initlib.models import build_model
from initlib.optim import RunsOptimizer, add_l2_, lr_factors, muon_update, newton_schulz5


def optimizer_of_one(name, model, lr, wd=0.0, aux_lr=None):
    """A single run: the model fused as a group of one, and its RunsOptimizer."""
    fused = fuse([model])
    return fused, RunsOptimizer(name, param_roles(fused, name), 1, [lr], [wd],
                                [aux_lr if aux_lr is not None else lr * 0.015])


def polar(G):
    U, _, Vh = torch.linalg.svd(G.double(), full_matrices=False)
    return (U @ Vh).float()


@pytest.mark.parametrize("shape", [(64, 64), (32, 128), (128, 32)])
def test_newton_schulz_approximates_polar_factor(shape):
    G = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    X, P = newton_schulz5(G), polar(G)
    # The quintic iteration trades exactness for speed: singular values land in ~[0.7, 1.2]
    # instead of 1 (the smallest ones of G are lifted less), so X is close to U V^T in
    # direction, not equal to it.
    cos = (X * P).sum() / (X.norm() * P.norm())
    assert cos > 0.95
    s = torch.linalg.svdvals(X.double())
    assert s.max() < 1.25
    assert ((s > 0.6) & (s < 1.25)).double().mean() > 0.9


def test_muon_update_on_4d_conv_kernel():
    g = torch.randn(16, 8, 3, 3, generator=torch.Generator().manual_seed(1))
    buf = torch.zeros_like(g)
    u = muon_update(g.clone(), buf, beta=0.95)
    assert u.shape == g.shape
    # first step: buf = 0.05 g; nesterov direction = g.lerp(buf, 0.95) = 0.0975 g -> same polar factor
    flat = u.reshape(16, -1)
    P = polar(g.reshape(16, -1))  # 16 x 72: wide, scale sqrt(max(1, 16/72)) = 1
    assert (flat * P).sum() / (flat.norm() * P.norm()) > 0.95
    torch.testing.assert_close(buf, 0.05 * g)


def test_muon_routes_parameters_by_role_and_trains_4d_kernels():
    model = build_model("resnet9", width=0.125, sigma_w=1.0)
    fused, opt = optimizer_of_one("muon", model, lr=0.02)
    muon_group, adam_group = opt.param_groups
    assert muon_group["role"] == "muon" and adam_group["role"] == "adam"
    muon_ids = {id(p) for p in muon_group["params"]}
    assert id(fused.prep[0].weight) not in muon_ids and id(fused.fc.weight) not in muon_ids
    assert all(p.ndim == 5 for p in muon_group["params"])  # (run, out, in, kh, kw)
    assert all(p.ndim == 2 or p is fused.prep[0].weight or p is fused.fc.weight
               for p in adam_group["params"])
    assert float(adam_group["base_lr"][0]) == pytest.approx(3e-4)  # reference aux AdamW lr for Muon lr 0.02
    w0 = fused.layer1[0][0].weight.detach().clone()
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    nn.functional.cross_entropy(fused(x), y).backward()
    opt.step()
    dw = (fused.layer1[0][0].weight.detach() - w0)[0]
    # no renormalization: the step is lr * (orthogonalized direction), nothing else
    assert 0 < dw.norm() < 0.02 * math.sqrt(min(dw.shape[0], dw[0].numel())) * 1.3
    assert not torch.allclose(dw, torch.zeros_like(dw))


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam", "adamw", "muon"])
def test_coupled_l2_is_added_to_the_gradient(name):
    """With a zero loss gradient, SGD's only update is the L2 term: w <- w - lr * l2 * w."""
    fused, opt = optimizer_of_one(name, build_model("resnet9", width=0.125), lr=0.1)
    before = [p.detach().clone() for p in fused.parameters()]
    for p in fused.parameters():
        p.grad = torch.zeros_like(p)
    add_l2_(fused.parameters(), torch.tensor([0.01], dtype=torch.float64))
    opt.step()
    after = list(fused.parameters())
    if name in ("sgd", "momentum"):
        for b, a in zip(before, after):
            torch.testing.assert_close(a.detach(), b * (1 - 0.1 * 0.01))
    else:  # adaptive: the L2 gradient l2*w is rescaled, but the step points against w
        for b, a in zip(before, after):
            if b.abs().sum() > 0:
                assert ((a.detach() - b) * b).sum() < 0


def test_decoupled_weight_decay_is_separate_from_l2():
    from initlib.config import ConfigError, validate
    with pytest.raises(ConfigError, match="weight_decay applies to adamw and muon"):
        validate({"optimizer": "sgd", "weight_decay": 0.1})


def test_lr_factors_hand_computed():
    np.testing.assert_allclose(lr_factors("constant", 4), [1, 1, 1, 1])
    np.testing.assert_allclose(lr_factors("cosine", 4), [1, 0.5 * (1 + math.cos(math.pi / 4)), 0.5,
                                                         0.5 * (1 + math.cos(3 * math.pi / 4))])
    np.testing.assert_allclose(lr_factors("step", 8, milestones=(0.5, 0.75), gamma=0.1),
                               [1, 1, 1, 1, 0.1, 0.1, 0.01, 0.01])
    np.testing.assert_allclose(lr_factors("constant", 5, warmup_steps=2), [0.5, 1, 1, 1, 1])
    np.testing.assert_allclose(lr_factors("cosine", 6, warmup_steps=2),
                               [0.5, 1, 1, 0.5 * (1 + math.cos(math.pi / 4)), 0.5,
                                0.5 * (1 + math.cos(3 * math.pi / 4))])


def test_set_lr_factor_scales_every_group_from_its_base():
    """SGD with a unit gradient moves every weight by lr * factor, per run (two runs, two lrs)."""
    fused = fuse([build_model("resnet9", width=0.125, seed=s) for s in (0, 1)])
    opt = RunsOptimizer("sgd", param_roles(fused, "sgd"), 2, [0.02, 0.1])
    w = fused.fc.weight
    before = w.detach().clone()
    for p in fused.parameters():
        p.grad = torch.ones_like(p)
    opt.set_lr_factor(0.5)
    opt.step()
    torch.testing.assert_close((before - w.detach())[0], torch.full_like(before[0], 0.01))
    torch.testing.assert_close((before - w.detach())[1], torch.full_like(before[1], 0.05))
