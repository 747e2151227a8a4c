"""Radio models of the three accesses: radio conditions → capacity and the KPIs a node reports."""
