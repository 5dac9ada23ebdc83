"""Rules whose bottleneck is memory: capacity, bandwidth, allocator churn, snapshots."""
