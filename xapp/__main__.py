"""``python -m xapp`` runs the ``atsss`` command line."""

from xapp.cli import main

main()
