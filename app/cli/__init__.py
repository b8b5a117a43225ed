"""The `petstore` command: set up the database, manage API keys, orders, pets and the
console's users, serve the API.

One module per command group (D31), put together here with `add_command`; what
they share is in `_shared`. Everything a person reads goes to standard error; standard
output carries only what a script would capture (a new key, --json listings).
"""

from __future__ import annotations

import click

from app.cli import contract, keys, orders, pets, service, users, webhooks


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="petstore-orders")
def main() -> None:
    """Pet Store Orders: an OpenAPI-first HTTP/JSON service for a pet store's orders.

    The database is named by PETSTORE_DATABASE: a SQLite file (default
    instance/petstore.db) or a postgresql:// URL that several hosts share. Start with
    `petstore init --demo`, then `petstore serve`.
    """


main.add_command(service.init)
main.add_command(service.serve)
main.add_command(service.backup)
main.add_command(keys.keys)
main.add_command(orders.orders_group)
main.add_command(pets.pets_group)
main.add_command(contract.contract_group)
main.add_command(webhooks.webhooks_group)
main.add_command(users.users_group)
