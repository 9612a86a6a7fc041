import math

import numpy as np
import pytest
import torch
from torch import nn

from initlib.models import build_model
from initlib.optim import (add_l2_, build_optimizer, lr_factors, muon_update, newton_schulz5,
                           set_lr_factor)


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
    opt = build_optimizer("muon", model, lr=0.02)
    muon_group, adam_group = opt.param_groups
    assert muon_group["use_muon"] and not adam_group["use_muon"]
    muon_ids = {id(p) for p in muon_group["params"]}
    assert id(model.prep[0].weight) not in muon_ids and id(model.fc.weight) not in muon_ids
    assert all(p.ndim == 4 for p in muon_group["params"])
    assert all(p.ndim == 1 or p is model.prep[0].weight or p is model.fc.weight
               for p in adam_group["params"])
    assert adam_group["lr"] == pytest.approx(3e-4)  # reference aux AdamW lr for Muon lr 0.02
    w0 = model.layer1[0][0].weight.detach().clone()
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    dw = model.layer1[0][0].weight.detach() - w0
    # no renormalization: the step is lr * (orthogonalized direction), nothing else
    assert 0 < dw.norm() < 0.02 * math.sqrt(min(dw.shape[0], dw[0].numel())) * 1.3
    assert not torch.allclose(dw, torch.zeros_like(dw))


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam", "adamw", "muon"])
def test_coupled_l2_is_added_to_the_gradient(name):
    """With a zero loss gradient, SGD's only update is the L2 term: w <- w - lr * l2 * w."""
    lin = nn.Sequential(nn.Conv2d(2, 2, 1), nn.Linear(2, 2), nn.Linear(2, 2))
    opt = build_optimizer(name, lin, lr=0.1)
    before = [p.detach().clone() for p in lin.parameters()]
    for p in lin.parameters():
        p.grad = torch.zeros_like(p)
    add_l2_(lin.parameters(), 0.01)
    opt.step()
    after = list(lin.parameters())
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
    opt = build_optimizer("muon", build_model("resnet9", width=0.125), lr=0.02, aux_lr=1e-3)
    set_lr_factor(opt, 0.5)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.01, 5e-4])
