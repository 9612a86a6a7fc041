"""Write a class-balanced CIFAR-10 subset as cifar10.npz (for a machine that can carry only
a few tens of MB, e.g. a short GPU session): python bench/make_subset.py OUT_DIR [N_TRAIN N_TEST].

A subset is other data: its content fingerprint differs from the full CIFAR-10's, so runs
trained on it are stored under other hashes and never mixed with (or served as) full-data runs."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from initlib.data import balanced_subset, load_raw  # noqa: E402

out = Path(sys.argv[1])
n_train = int(sys.argv[2]) if len(sys.argv) > 2 else 12000
n_test = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
x, y, xt, yt = load_raw()
i, j = balanced_subset(y, n_train), balanced_subset(yt, n_test)
out.mkdir(parents=True, exist_ok=True)
np.savez_compressed(out / "cifar10.npz", x_train=x[i], y_train=y[i], x_test=xt[j], y_test=yt[j])
print(f"wrote {out / 'cifar10.npz'}: {n_train} train, {n_test} test, "
      f"{(out / 'cifar10.npz').stat().st_size / 2**20:.1f} MiB")
