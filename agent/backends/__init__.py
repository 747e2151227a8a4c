"""Kernel backends: the only code that writes weights where MPTCP sends."""
