"""CIFAR-10 as tensors on the training device: the paper's 40k/10k/10k split.

Sources, tried in this order inside the data directory:

1. ``cifar10.npz`` (arrays ``x_train`` (50000,32,32,3) uint8, ``y_train``, ``x_test``,
   ``y_test``), e.g. the offline copy described in ``../shared/data/cifar10/README.md``;
2. torchvision's ``cifar-10-batches-py/`` (``torchvision.datasets.CIFAR10``), downloaded
   when ``download=True`` (``--download`` / ``INITLIB_DOWNLOAD=1``).

The data directory is the ``data_dir`` argument, else ``$INITLIB_DATA_DIR``, else
``data/`` in the project root.

Split (the paper: "a 40k train / 10k validation split of the 50k training set; the 10k
test set for test accuracy"): a permutation of the 50k training images seeded by
``split_seed`` (default 0); its first 40k are train, the last 10k validation. Small profiles
take class-balanced subsets: the first ``n/10`` images of each class, in split order.

No DataLoader: the images live on the device as one uint8 tensor per split; batches are
normalized on the fly, and shuffling and augmentation are a few batched tensor ops driven
by a per-epoch seeded generator, so any epoch can be replayed exactly (that is what makes
resume-from-checkpoint give identical metrics).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
N_TRAIN_FULL, N_VAL_FULL = 40000, 10000
NUM_CLASSES = 10


class DataNotFoundError(FileNotFoundError):
    pass


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    if data_dir is None:
        data_dir = os.environ.get("INITLIB_DATA_DIR") or (PROJECT_ROOT / "data")
    return Path(data_dir).expanduser()


def _want_download(download: bool | None) -> bool:
    if download is not None:
        return download
    return os.environ.get("INITLIB_DOWNLOAD", "").lower() in ("1", "true", "yes")


def check_data_available(data_dir=None, download: bool | None = None) -> Path:
    """Return the data dir, or raise DataNotFoundError saying both ways to get CIFAR-10."""
    d = resolve_data_dir(data_dir)
    if (d / "cifar10.npz").is_file() or (d / "cifar-10-batches-py").is_dir():
        return d
    if _want_download(download):
        return d
    raise DataNotFoundError(
        f"CIFAR-10 not found in {d}.\n"
        f"  Either put cifar10.npz there (or point --data-dir / INITLIB_DATA_DIR at a folder "
        f"holding it; the offline copy is ../shared/data/cifar10),\n"
        f"  or let torchvision download it into that folder: pass --download or set "
        f"INITLIB_DOWNLOAD=1 (needs internet, ~170 MB).")


_RAW_CACHE: dict[str, tuple] = {}


def load_raw(data_dir=None, download: bool | None = None):
    """(x_train, y_train, x_test, y_test) as numpy uint8 HWC / int64, in file order."""
    d = check_data_available(data_dir, download)
    key = str(d.resolve())
    if key in _RAW_CACHE:
        return _RAW_CACHE[key]
    if (d / "cifar10.npz").is_file():
        with np.load(d / "cifar10.npz") as z:
            raw = (z["x_train"], z["y_train"].astype(np.int64),
                   z["x_test"], z["y_test"].astype(np.int64))
    else:
        from torchvision.datasets import CIFAR10
        d.mkdir(parents=True, exist_ok=True)
        tr = CIFAR10(str(d), train=True, download=_want_download(download))
        te = CIFAR10(str(d), train=False, download=_want_download(download))
        raw = (np.asarray(tr.data), np.asarray(tr.targets, dtype=np.int64),
               np.asarray(te.data), np.asarray(te.targets, dtype=np.int64))
    if raw[0].shape[1:] != (32, 32, 3) or raw[2].shape[1:] != (32, 32, 3) or len(raw[0]) != len(raw[1]):
        raise ValueError(f"unexpected CIFAR-10 shapes in {d}: {raw[0].shape}, {raw[2].shape}")
    if len(raw[0]) != 50000:
        warnings.warn(f"{d}: a CIFAR-10 subset of {len(raw[0])} training images (full: 50,000); "
                      f"the train/validation split keeps the 4:1 ratio")
    _RAW_CACHE[key] = raw
    return raw


def balanced_subset(labels: np.ndarray, n: int) -> np.ndarray:
    """Indices of the first n/10 items of each class, kept in their original order."""
    if n % NUM_CLASSES:
        raise ValueError(f"class-balanced subset needs a multiple of 10, got {n}")
    per = n // NUM_CLASSES
    keep = np.zeros(len(labels), dtype=bool)
    for c in range(NUM_CLASSES):
        idx = np.flatnonzero(labels == c)
        if len(idx) < per:
            raise ValueError(f"class {c} has {len(idx)} items, fewer than {per}")
        keep[idx[:per]] = True
    return np.flatnonzero(keep)


def split_indices(y_train_full: np.ndarray, split_seed: int, n_train: int, n_val: int):
    """Indices into the 50k training images for (train, val): seeded 40k/10k split, then
    class-balanced subsets of each side."""
    perm = np.random.default_rng(split_seed).permutation(len(y_train_full))
    n_tr_full = len(perm) * 4 // 5  # 40,000 of the 50,000 training images
    tr, va = perm[:n_tr_full], perm[n_tr_full:]
    if n_train < len(tr):
        tr = tr[balanced_subset(y_train_full[tr], n_train)]
    if n_val < len(va):
        va = va[balanced_subset(y_train_full[va], n_val)]
    return tr, va


@dataclass
class Split:
    """One split on the device: uint8 NCHW images and int64 labels."""
    x: torch.Tensor
    y: torch.Tensor

    def __len__(self):
        return len(self.y)


@dataclass
class CIFAR10Data:
    train: Split
    val: Split
    test: Split
    mean: torch.Tensor
    std: torch.Tensor

    def normalize(self, x_uint8: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
        x = x_uint8.to(dtype).div_(255.0)
        x = (x - self.mean.to(dtype)) / self.std.to(dtype)
        return x.contiguous(memory_format=torch.channels_last)


def load_cifar10(data_dir=None, *, n_train=N_TRAIN_FULL, n_val=N_VAL_FULL, n_test=10000,
                 split_seed=0, device="cpu", download: bool | None = None) -> CIFAR10Data:
    x_tr, y_tr, x_te, y_te = load_raw(data_dir, download)
    tr, va = split_indices(y_tr, split_seed, n_train, n_val)
    te = np.arange(len(y_te)) if n_test >= len(y_te) else balanced_subset(y_te, n_test)

    def to_split(x, y, idx):
        xt = torch.from_numpy(np.ascontiguousarray(x[idx].transpose(0, 3, 1, 2)))
        return Split(xt.to(device), torch.from_numpy(y[idx]).to(device))

    mean = torch.tensor(CIFAR10_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR10_STD, device=device).view(1, 3, 1, 1)
    return CIFAR10Data(to_split(x_tr, y_tr, tr), to_split(x_tr, y_tr, va),
                       to_split(x_te, y_te, te), mean, std)


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """The CPU generator that drives shuffling and augmentation of one epoch."""
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def epoch_order(n: int, seed: int, epoch: int, device) -> torch.Tensor:
    return torch.randperm(n, generator=epoch_generator(seed, epoch)).to(device)


def augment_params(n: int, seed: int, epoch: int, device, pad: int = 4):
    """Per-image crop offsets in [0, 2*pad] and flip flags for one epoch."""
    g = epoch_generator(seed + 7919, epoch)
    offsets = torch.randint(0, 2 * pad + 1, (n, 2), generator=g)
    flips = torch.rand(n, generator=g) < 0.5
    return offsets.to(device), flips.to(device)


def random_crop_flip(x: torch.Tensor, offsets: torch.Tensor, flips: torch.Tensor,
                     pad: int = 4) -> torch.Tensor:
    """Batched random crop (zero padding ``pad``) and horizontal flip of NCHW images."""
    n, c, h, w = x.shape
    xp = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    ar_h = torch.arange(h, device=x.device)
    ar_w = torch.arange(w, device=x.device)
    rows = (offsets[:, 0:1] + ar_h)                       # (n, h)
    cols = offsets[:, 1:2] + ar_w                         # (n, w)
    cols = torch.where(flips[:, None], cols.flip(1), cols)
    bi = torch.arange(n, device=x.device)[:, None, None]
    out = xp.permute(0, 2, 3, 1)[bi, rows[:, :, None], cols[:, None, :]]  # (n, h, w, c)
    return out.permute(0, 3, 1, 2)
