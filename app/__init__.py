"""The Pet Store Orders service.

Two parts, one direction of dependency (stated as import-linter contracts in
pyproject.toml and checked by `make lint`):

- ``app.web``: everything that knows HTTP or ASGI (Connexion, Flask, Starlette, uvicorn,
  gunicorn): create_app, the middlewares, routing, the handlers, the bearer check, the
  Error responses, /metrics and the probes.
- ``app.core``: what the service knows without HTTP: the order and pet rules, API keys,
  quota plans and counters, settings, the domain's exceptions, and the stores. It imports
  no web framework.

``app.cli`` (the ``petstore`` command) stands beside the web wing, on the core alone;
``app.outbound`` sends webhook messages for both.

A comment that says "D7" cites decision D7 of docs/house/decisions.md (its anchor
``#d7``): the decisions the code relies on, in the repository, one heading each.
"""

__version__ = "1.0.0"
"""The service's version: info.version of the OpenAPI document, and part of the list's ETag."""
