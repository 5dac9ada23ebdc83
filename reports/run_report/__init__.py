"""What one run's report carries beyond its analysis: its experiments, the commands to reproduce them, its environment."""
