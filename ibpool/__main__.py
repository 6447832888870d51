"""`python -m ibpool` runs the CLI."""

from ibpool.cli import main_entry

main_entry()
