"""Scenarios: the YAML format, loading with clear errors, and sampling of ground truth."""
