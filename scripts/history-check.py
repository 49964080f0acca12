#!/usr/bin/env python3
"""benchkit history's export read by its users' readers: the Parquet file by
pandas through pyarrow, the CSV by pandas, each point of one the same as the
other's, column by column; and every column the `points` view documents.

usage: history-check.py POINTS.parquet POINTS.csv
"""
import math
import sys

import pandas as pd

COLUMNS = [
    "series", "cell_label", "cell", "run_name", "run_id", "created_unix_ms", "code_commit",
    "run_label", "benchkit_version", "benchkit_commit", "burn_version", "engine", "machine",
    "hostname", "repeats", "images_per_s", "step_p50_ms", "step_p90_ms", "data_wait_pct",
    "exposed_communication_pct", "final_test_accuracy", "time_to_target_s",
]


def main(parquet, csv):
    a = pd.read_parquet(parquet, engine="pyarrow")
    b = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert list(a.columns) == COLUMNS, list(a.columns)
    assert list(b.columns) == COLUMNS, list(b.columns)
    assert len(a) == len(b) > 0, (len(a), len(b))
    assert a["images_per_s"].notna().any(), "no images/s in the Parquet file"
    for col in COLUMNS:
        for i, (x, y) in enumerate(zip(a[col], b[col])):
            where = f"row {i}, {col}: parquet {x!r}, csv {y!r}"
            if y == "":
                assert pd.isna(x), where
            elif col in ("created_unix_ms", "repeats"):
                assert int(x) == int(y), where
            elif a[col].dtype.kind == "f":
                assert math.isclose(float(x), float(y), rel_tol=1e-12), where
            else:
                assert str(x) == (y[1:] if y[:1] == "'" and str(x)[:1] in "=+@\t\r" else y), where
    print(f"history export: {len(a)} points of {a['series'].nunique()} series, Parquet and CSV agree")


if __name__ == "__main__":
    main(*sys.argv[1:3])
