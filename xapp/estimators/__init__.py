"""Capacity estimators: each turns KPI samples into ``CapacityEstimate``s (see ``xapp.ports``)."""
