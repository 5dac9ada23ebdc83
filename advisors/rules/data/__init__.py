"""Rules whose bottleneck is the input pipeline."""
