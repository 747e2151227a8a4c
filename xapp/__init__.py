"""The ATSSS weight-control xApp: control loop, estimators, weight policy, evaluation."""
