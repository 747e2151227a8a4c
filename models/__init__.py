"""Offline training pipeline and the shipped capacity models."""
