"""``python -m atsss`` runs the ``atsss`` command line."""

from atsss.cli import main

main()
