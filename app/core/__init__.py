"""The core: the service's rules and data, with no HTTP in them.

config (Settings), logs (one JSON shape for every log line), errors (the domain's
exceptions), orders and pets (the rules), keys (API keys: generate, hash, look up,
cache), quotas (plans and counters), listing (the encoded order list), health
(readiness), metrics (the instruments), services (what the web wing hands its handlers),
storage (the Store protocol, SQLite and PostgreSQL).
Nothing here imports a web framework (import-linter checks it).
"""
