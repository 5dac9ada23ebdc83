"""Rules for a device kept waiting by the host: launch overhead and synchronisations."""
