"""Rules whose bottleneck is compute on the device (or the CPU doing the math)."""
