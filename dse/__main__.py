"""`python -m dse` runs the command-line interface."""

from dse.cli import main

main()
