"""What every part shares and depends on nothing of ours: the domain vocabulary, the scenario
format, E2 node naming and the standalone E2 framing, facts from the radio standards, and the
console helpers of the command line."""
