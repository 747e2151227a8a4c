"""The CPE and MPTCP proxy agent that writes weights to the kernel."""
