"""The E2 path: subscriptions through the RIC's submgr (or the standalone E2 stream), and the
indications that come back, decoded into KPI samples for the control loop."""
