"""The evaluation harness: the closed-loop bench in simulated time (contenders, the connection
model, simulated KPIs and probes, reports, plots), the netns testbed bench, and the timing
benches. It judges the xApp from outside, through its public pieces; nothing imports it."""
