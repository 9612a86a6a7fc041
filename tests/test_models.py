import math
import pickle

import pytest
import torch
from torch import nn

from initlib.models import build_model, count_macs, kernels


@pytest.mark.parametrize("arch,width", [("resnet9", 0.5), ("resnet20", 1.0)])
@pytest.mark.parametrize("sigma_w", [0.1, 1.0, math.sqrt(2), 2.5])
def test_init_statistics_per_layer(arch, width, sigma_w):
    model = build_model(arch, width=width, sigma_w=sigma_w, seed=3)
    for name, m in model.named_modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            w = m.weight.detach().double()
            fan_in = w[0].numel()
            target = sigma_w / math.sqrt(fan_in)
            n = w.numel()
            # sample std of n Gaussian draws: relative error ~ 1/sqrt(2n); allow 5 of those
            assert abs(w.std().item() / target - 1) < 5 / math.sqrt(2 * n) + 1e-3, name
            assert abs(w.mean().item()) < 5 * target / math.sqrt(n), name
            if m.bias is not None:
                assert torch.all(m.bias == 0)
        elif isinstance(m, nn.BatchNorm2d):
            assert torch.all(m.weight == 1) and torch.all(m.bias == 0)


def test_init_is_seeded():
    a = build_model("resnet9", width=0.25, sigma_w=1.0, seed=1)
    b = build_model("resnet9", width=0.25, sigma_w=1.0, seed=1)
    c = build_model("resnet9", width=0.25, sigma_w=1.0, seed=2)
    for (_, pa), (_, pb), (_, pc) in zip(a.state_dict().items(), b.state_dict().items(), c.state_dict().items()):
        assert torch.equal(pa, pb)
    assert not torch.equal(kernels(a)["prep.0"], kernels(c)["prep.0"])


def test_sigma_w_only_scales_kernels():
    a = build_model("resnet56", width=0.25, sigma_w=0.5, seed=0)
    b = build_model("resnet56", width=0.25, sigma_w=2.0, seed=0)
    for name in kernels(a):
        torch.testing.assert_close(kernels(b)[name], 4.0 * kernels(a)[name])


@pytest.mark.parametrize("arch", ["resnet9", "resnet20"])
def test_batchnorm_makes_forward_invariant_to_kernel_scale(arch):
    """A conv followed by BatchNorm: scaling its kernel by c > 0 leaves the output unchanged
    (train mode, batch statistics) -- the scale invariance the paper's clocks build on."""
    torch.manual_seed(0)
    model = build_model(arch, width=0.25, sigma_w=1.0, seed=0).train()
    x = torch.randn(16, 3, 32, 32)
    ref = model(x)
    with torch.no_grad():
        for name, w in kernels(model).items():
            if not isinstance(dict(model.named_modules())[name], nn.Linear):
                w.mul_(7.3)
    torch.testing.assert_close(model(x), ref, rtol=1e-4, atol=1e-4)
    with torch.no_grad():  # the head is not followed by BN: its scale does change the output
        kernels(model)["fc"].mul_(2.0)
    assert not torch.allclose(model(x), ref, atol=1e-3)


def test_architectures_match_their_papers():
    n_params = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    # He et al. (2016), Table 6: 0.27M, 0.85M, 1.7M parameters
    assert abs(n_params(build_model("resnet20")) / 0.27e6 - 1) < 0.03
    assert abs(n_params(build_model("resnet56")) / 0.85e6 - 1) < 0.03
    assert abs(n_params(build_model("resnet110")) / 1.7e6 - 1) < 0.03
    r9 = build_model("resnet9")
    assert n_params(r9) == pytest.approx(6.57e6, rel=0.01)  # Myrtle ResNet-9
    assert count_macs(r9) == pytest.approx(0.38e9, rel=0.05)  # ~0.38 GMAC forward
    for arch in ("resnet9", "resnet20", "resnet56"):
        out = build_model(arch, width=0.25)(torch.randn(2, 3, 32, 32))
        assert out.shape == (2, 10)


def test_models_pickle():
    for arch in ("resnet9", "resnet20"):
        m = build_model(arch, width=0.25)
        m2 = pickle.loads(pickle.dumps(m))
        x = torch.randn(2, 3, 32, 32)
        torch.testing.assert_close(m.eval()(x), m2.eval()(x))
