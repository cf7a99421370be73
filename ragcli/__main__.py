"""`python -m ragcli` runs the `rag` command."""

from .cli import main

main()
