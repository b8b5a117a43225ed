"""Quotas without HTTP: plans (from the OpenAPI document's x-plans) and counters (in
process memory, in Redis, or any storage of the limits library, with a fallback). The
middleware that applies them to requests is app.web.caller."""
