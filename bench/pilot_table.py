"""Print the pilot runs of a params file as one table: python bench/pilot_table.py FILE STORE."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from initlib import analysis, store  # noqa: E402
from initlib.params import load_params  # noqa: E402

sw = load_params(sys.argv[1], "cpu")
s = store.load_summaries(sys.argv[2], sw.configs)
cols = ["optimizer", "lr", "sigma_w", "max_train_acc", "tau_interp", "test_acc_at_best_val",
        "best_val_epoch", "final_weight_norm", "T_SGD", "T_adapt"]
t = s[cols].copy()
for c in ("max_train_acc", "test_acc_at_best_val"):
    t[c] = 100 * t[c]
t["tau_interp"] = t["tau_interp"].map(lambda v: "fails" if v != v or v is None else str(int(v)))
print(analysis.format_table(t))
print()
print(analysis.format_table(analysis.spread_table(s, ["optimizer", "lr"])
                            [["optimizer", "lr", "spread_pp", "interpolated", "T_SGD", "T_adapt"]]))
