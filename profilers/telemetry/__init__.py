"""Telemetry: the background sampler (NVML when a GPU answers, host counters via psutil otherwise), the process tree it watches, and the summary the advisor reads."""
