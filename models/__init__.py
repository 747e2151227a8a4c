"""Offline training pipeline and the shipped capacity models (issue 6; not built yet)."""
