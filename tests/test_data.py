import numpy as np
import pytest
import torch

from initlib.data import (DataNotFoundError, check_data_available, load_cifar10, load_raw,
                          random_crop_flip, split_indices)


def test_split_is_40k_10k_disjoint_seeded_and_balanced():
    _, y, _, _ = load_raw()
    tr, va = split_indices(y, 0, 40000, 10000)
    assert len(tr) == 40000 and len(va) == 10000
    assert len(np.intersect1d(tr, va)) == 0 and len(np.union1d(tr, va)) == 50000
    tr2, va2 = split_indices(y, 0, 40000, 10000)
    assert np.array_equal(tr, tr2)
    assert not np.array_equal(tr, split_indices(y, 1, 40000, 10000)[0])
    sub_tr, sub_va = split_indices(y, 0, 500, 200)
    assert np.bincount(y[sub_tr]).tolist() == [50] * 10
    assert np.bincount(y[sub_va]).tolist() == [20] * 10
    assert set(sub_tr) <= set(tr) and set(sub_va) <= set(va)


def test_load_to_device_tensors():
    d = load_cifar10(n_train=100, n_val=50, n_test=50)
    assert d.train.x.shape == (100, 3, 32, 32) and d.train.x.dtype == torch.uint8
    assert torch.bincount(d.test.y).tolist() == [5] * 10
    x = d.normalize(d.train.x)
    assert x.dtype == torch.float32 and abs(x.mean().item()) < 0.3


def test_missing_data_error_names_both_ways(tmp_path, monkeypatch):
    monkeypatch.delenv("INITLIB_DOWNLOAD", raising=False)
    with pytest.raises(DataNotFoundError) as e:
        check_data_available(tmp_path)
    msg = str(e.value)
    assert str(tmp_path) in msg and "cifar10.npz" in msg and "INITLIB_DATA_DIR" in msg
    assert "--download" in msg and "torchvision" in msg


def test_random_crop_flip():
    x = torch.arange(2 * 3 * 32 * 32, dtype=torch.float32).view(2, 3, 32, 32)
    center = torch.full((2, 2), 4)
    no = torch.zeros(2, dtype=torch.bool)
    assert torch.equal(random_crop_flip(x, center, no), x)                   # offset = pad: identity
    assert torch.equal(random_crop_flip(x, center, ~no), x.flip(3))          # flip only
    out = random_crop_flip(x, torch.tensor([[0, 4], [4, 8]]), no)           # shift down / left
    assert torch.equal(out[0, :, 4:], x[0, :, :28]) and torch.all(out[0, :, :4] == 0)
    assert torch.equal(out[1, :, :, :28], x[1, :, :, 4:]) and torch.all(out[1, :, :, 28:] == 0)
