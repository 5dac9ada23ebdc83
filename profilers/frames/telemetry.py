"""Telemetry of a stored run, downsampled for charts: at most ``max_points`` rows per device.

Input: ``RunStore.read_telemetry`` (``t_unix_ns, t_trace_us, source`` then one column per metric; NVML lines
carry a ``gpu`` index). Output: the same metric columns, averaged per time bucket, plus ``t_s`` (seconds since
the first sample) and ``t_unix_ns`` (the bucket's first sample), one series per ``gpu`` when present (the host's
lines beside NVML ones have no ``gpu``: their series keeps ``gpu`` empty).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MAX_POINTS = 1500
_META = (
    "t_unix_ns",
    "t_trace_us",
    "source",
    "gpu",
    "cpu_count",
)  # cpu_count: the machine, not a metric


def metric_columns(telemetry: pd.DataFrame) -> list[str]:
    """Numeric metric columns (everything but the time, source and gpu columns)."""
    return [
        c
        for c in telemetry.columns
        if c not in _META and pd.api.types.is_numeric_dtype(telemetry[c])
    ]


def downsample_telemetry(telemetry: pd.DataFrame, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """Bucketed means per device (see the module docs); an empty frame stays empty."""
    if telemetry.empty or "t_unix_ns" not in telemetry or telemetry["t_unix_ns"].isna().all():
        return pd.DataFrame(columns=["t_s", "t_unix_ns", "source"])
    df = telemetry.dropna(subset=["t_unix_ns"]).copy()
    t0 = int(df["t_unix_ns"].min())
    df["t_s"] = (df["t_unix_ns"].astype("int64") - t0) / 1e9
    metrics = metric_columns(df)
    keys = ["gpu"] if "gpu" in df.columns and df["gpu"].notna().any() else []
    span = max(float(df["t_s"].max()), 1e-9)
    df["_b"] = np.minimum((df["t_s"] / span * max_points).astype(int), max_points - 1)
    agg = {m: (m, "mean") for m in metrics}
    agg.update(t_s=("t_s", "first"), t_unix_ns=("t_unix_ns", "first"), source=("source", "first"))
    out = (
        df.groupby([*keys, "_b"], sort=True, dropna=False).agg(**agg).reset_index()
    )  # host rows: no gpu
    return out.drop(columns="_b").sort_values([*keys, "t_s"], ignore_index=True)
