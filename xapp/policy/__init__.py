"""Weight policy: the WRR fluid model, the exact integer optimiser, baselines, hysteresis."""
