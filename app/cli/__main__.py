"""``python -m app.cli`` runs the ``koord`` command line."""

from app.cli.main import main

main()
