"""CIFAR-10 as tensors on the training device: the paper's 40k/10k/10k split.

Sources, tried in this order inside the data directory (both give the same arrays: torchvision's
batches are put in the npz's canonical order, see :func:`canonical_order`):

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

import hashlib
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


class DataError(ValueError):
    """A data file that is there but cannot be CIFAR-10 (truncated, wrong arrays or shapes)."""


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    if data_dir is None:
        data_dir = os.environ.get("INITLIB_DATA_DIR") or (PROJECT_ROOT / "data")
    return Path(data_dir).expanduser()


def _want_download(download: bool | None) -> bool:
    if download is not None:
        return download
    return os.environ.get("INITLIB_DOWNLOAD", "").lower() in ("1", "true", "yes")


def data_available(data_dir=None) -> bool:
    d = resolve_data_dir(data_dir)
    return (d / "cifar10.npz").is_file() or (d / "cifar-10-batches-py").is_dir()


def check_data_available(data_dir=None, download: bool | None = None) -> Path:
    """Return the data dir, or raise DataNotFoundError saying both ways to get CIFAR-10."""
    d = resolve_data_dir(data_dir)
    if data_available(d) or _want_download(download):
        return d
    raise DataNotFoundError(
        f"CIFAR-10 not found in {d}.\n"
        f"  Either put cifar10.npz there (or point --data-dir / INITLIB_DATA_DIR at a folder "
        f"holding it; the offline copy is ../shared/data/cifar10),\n"
        f"  or let torchvision download it into that folder: pass --download or set "
        f"INITLIB_DOWNLOAD=1 (needs internet, ~170 MB).")


_RAW_CACHE: dict[str, tuple] = {}
NPZ_ARRAYS = ("x_train", "y_train", "x_test", "y_test")


def _read_npz(path: Path) -> tuple:
    try:
        with np.load(path) as z:
            missing = [k for k in NPZ_ARRAYS if k not in z.files]
            if missing:
                raise DataError(f"{path}: no array {', '.join(missing)} (needs {', '.join(NPZ_ARRAYS)})")
            return (z["x_train"], z["y_train"].astype(np.int64), z["x_test"], z["y_test"].astype(np.int64))
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 - BadZipFile, EOFError, pickle errors, ...
        raise DataError(f"{path}: not a readable npz file ({type(e).__name__}: {e})") from None


def canonical_order(labels: np.ndarray, names: list) -> np.ndarray:
    """The order of ``cifar10.npz`` (see ../shared/data/cifar10/README.md): within each class
    the files sorted by name, then the classes interleaved round-robin, i.e. sorted by (rank of
    the file name within its class, class). Applied to torchvision's batches, whose files carry
    the same names, it gives the npz's arrays, so both sources are one data set."""
    rank = np.empty(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        rank[idx[sorted(range(len(idx)), key=lambda i: names[idx[i]])]] = np.arange(len(idx))
    return np.lexsort((labels, rank))


def _read_torchvision(d: Path, download: bool) -> tuple:
    import pickle
    from torchvision.datasets import CIFAR10
    d.mkdir(parents=True, exist_ok=True)
    if download:
        CIFAR10(str(d), train=True, download=True)
    folder = d / "cifar-10-batches-py"

    def read(files):
        xs, ys, names = [], [], []
        for f in files:
            try:
                with open(folder / f, "rb") as fh:
                    b = pickle.load(fh, encoding="bytes")
                xs.append(np.asarray(b[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
                ys.append(np.asarray(b[b"labels"], dtype=np.int64))
                names += [n.decode() if isinstance(n, bytes) else str(n) for n in b[b"filenames"]]
            except Exception as e:  # noqa: BLE001
                raise DataError(f"{folder / f}: not a readable CIFAR-10 batch ({type(e).__name__}: {e})") from None
        x, y = np.concatenate(xs), np.concatenate(ys)
        order = canonical_order(y, names)
        return np.ascontiguousarray(x[order]), y[order]
    x_tr, y_tr = read([f"data_batch_{i}" for i in range(1, 6)])
    x_te, y_te = read(["test_batch"])
    return x_tr, y_tr, x_te, y_te


def load_raw(data_dir=None, download: bool | None = None):
    """(x_train, y_train, x_test, y_test) as numpy uint8 HWC / int64, in the canonical order
    of ``cifar10.npz`` (torchvision's batches are reordered to it). Raises DataError, naming
    the file, for anything that is not CIFAR-10-shaped."""
    d = check_data_available(data_dir, download)
    key = str(d.resolve())
    if key in _RAW_CACHE:
        return _RAW_CACHE[key]
    if (d / "cifar10.npz").is_file():
        src, raw = d / "cifar10.npz", _read_npz(d / "cifar10.npz")
    else:
        src, raw = d / "cifar-10-batches-py", _read_torchvision(d, _want_download(download))
    x_tr, y_tr, x_te, y_te = raw
    problems = []
    for name, x, y in (("train", x_tr, y_tr), ("test", x_te, y_te)):
        if x.ndim != 4 or x.shape[1:] != (32, 32, 3) or x.dtype != np.uint8:
            problems.append(f"x_{name} has shape {x.shape} {x.dtype}, not (N, 32, 32, 3) uint8")
        if y.shape != (len(x),):
            problems.append(f"y_{name} has shape {y.shape}, not ({len(x)},)")
        elif len(y) and (y.min() < 0 or y.max() >= NUM_CLASSES):
            problems.append(f"y_{name} has labels outside 0..9")
    if problems:
        raise DataError(f"{src}: " + "; ".join(problems))
    if len(x_tr) != 50000:
        warnings.warn(f"{d}: a CIFAR-10 subset of {len(x_tr)} training images (full: 50,000); "
                      f"the train/validation split keeps the 4:1 ratio")
    _RAW_CACHE[key] = raw
    return raw


# The fingerprint of the full CIFAR-10 (cifar10.npz of ../shared, or torchvision's download
# in canonical order): what an analysis assumes when no data is at hand (it reads stored runs).
CIFAR10_FINGERPRINT = "783494eed1948d52"
_FP_CACHE: dict[tuple, str] = {}


def fingerprint_arrays(raw) -> str:
    """16 hex digits of sha256 over the four arrays (shape, dtype and bytes, in order)."""
    h = hashlib.sha256()
    for a in raw:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def fingerprint(data_dir=None) -> str:
    """The content fingerprint of the data in ``data_dir``: part of every run's identity, so
    that a run on other data (a subset, a corrupted copy) is another run."""
    d = resolve_data_dir(data_dir)
    src = d / "cifar10.npz" if (d / "cifar10.npz").is_file() else d / "cifar-10-batches-py"
    st = src.stat() if src.exists() else None
    key = (str(src.resolve()), st.st_size if st else None, st.st_mtime_ns if st else None)
    if key not in _FP_CACHE:
        _FP_CACHE[key] = fingerprint_arrays(load_raw(d))
    return _FP_CACHE[key]


def split_capacity(y_train_full: np.ndarray, split_seed: int) -> tuple[int, int]:
    """The largest class-balanced (n_train, n_val) that the split of ``split_seed`` allows:
    10 x the smallest class count on each side."""
    tr, va = _split_sides(y_train_full, split_seed)
    return (NUM_CLASSES * int(np.bincount(y_train_full[tr], minlength=NUM_CLASSES).min()),
            NUM_CLASSES * int(np.bincount(y_train_full[va], minlength=NUM_CLASSES).min()))


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


def _split_sides(y_train_full: np.ndarray, split_seed: int):
    perm = np.random.default_rng(split_seed).permutation(len(y_train_full))
    n_tr_full = len(perm) * 4 // 5  # 40,000 of the 50,000 training images
    return perm[:n_tr_full], perm[n_tr_full:]


def split_indices(y_train_full: np.ndarray, split_seed: int, n_train: int, n_val: int):
    """Indices into the 50k training images for (train, val): seeded 40k/10k split, then
    class-balanced subsets of each side."""
    tr, va = _split_sides(y_train_full, split_seed)
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
    test: Split          # the n_test images that the per-epoch curves use
    mean: torch.Tensor
    std: torch.Tensor
    full_test: Split | None = None   # the n_selected_test images the selected predictor is scored on
    test_index: np.ndarray | None = None  # positions of ``test`` within ``full_test``

    def normalize(self, x_uint8: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
        x = x_uint8.to(dtype).div_(255.0)
        x = (x - self.mean.to(dtype)) / self.std.to(dtype)
        return x.contiguous(memory_format=torch.channels_last)


def load_cifar10(data_dir=None, *, n_train=N_TRAIN_FULL, n_val=N_VAL_FULL, n_test=10000,
                 split_seed=0, device="cpu", download: bool | None = None,
                 n_selected_test: int | None = None) -> CIFAR10Data:
    x_tr, y_tr, x_te, y_te = load_raw(data_dir, download)
    tr, va = split_indices(y_tr, split_seed, n_train, n_val)
    te = np.arange(len(y_te)) if n_test >= len(y_te) else balanced_subset(y_te, n_test)

    def to_split(x, y, idx):
        xt = torch.from_numpy(np.ascontiguousarray(x[idx].transpose(0, 3, 1, 2)))
        return Split(xt.to(device), torch.from_numpy(y[idx]).to(device))

    mean = torch.tensor(CIFAR10_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR10_STD, device=device).view(1, 3, 1, 1)
    test = to_split(x_te, y_te, te)
    # the images the selected predictor is scored on: all (n_selected_test >= the test set),
    # else the first n_selected_test/10 of each class, which hold the n_test ones
    n_sel = len(y_te) if n_selected_test is None else min(n_selected_test, len(y_te))
    sel = np.arange(len(y_te)) if n_sel >= len(y_te) else balanced_subset(y_te, n_sel)
    full = test if np.array_equal(sel, te) else to_split(x_te, y_te, sel)
    return CIFAR10Data(to_split(x_tr, y_tr, tr), to_split(x_tr, y_tr, va), test, mean, std,
                       full, np.searchsorted(sel, te))


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
