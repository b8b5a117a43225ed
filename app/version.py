"""The service's version: info.version of the OpenAPI document, and part of the list's ETag."""

__version__ = "1.0.0"
