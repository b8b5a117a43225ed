"""The handlers of openapi/petstore-v1.yaml (frozen: see openapi/released/)."""
