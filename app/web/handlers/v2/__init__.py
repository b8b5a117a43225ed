"""The handlers of openapi/petstore-v2.yaml."""
