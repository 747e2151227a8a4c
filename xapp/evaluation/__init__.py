"""Closed-loop evaluation in simulated time: contenders, the connection model, reports, plots."""
