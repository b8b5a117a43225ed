"""`python -m app.cli`: the `petstore` command, for tests and hosts without the script."""

from app.cli import main

main()
