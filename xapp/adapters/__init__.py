"""Adapters that implement the control loop's ports (``xapp.ports``)."""
