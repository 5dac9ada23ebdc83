"""Rules whose bottleneck is communication between ranks."""
