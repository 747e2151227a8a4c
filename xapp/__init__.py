"""The ATSSS weight-control xApp, what runs in a RIC: control loop, estimators, weight policy,
E2 adapters and state."""
