"""Efficiency: FLOPs from operator shapes, device peaks, model FLOPs utilisation (torch-free)."""
