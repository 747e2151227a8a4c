"""The `atsss` command line: assembles the command lines of the packages it finds installed."""
