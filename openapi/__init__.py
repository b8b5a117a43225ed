"""The OpenAPI documents, installed as the package ``app.openapi`` (pyproject.toml's
package-dir): the service reads them with ``importlib.resources.files("app.openapi")``, from
the wheel as from a checkout. This file makes the folder a package, which an editable
install needs to map it under ``app``; the folder holds no code."""
