"""Settings: one declared table, the only reader of PETSTORE_* environment variables.

Every setting has a name, a default and a help text; the manual's settings page is rendered
from this table (docs/hooks/reference.py) and tests/test_docs.py checks it (after
datasette's DEFAULT_SETTINGS).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.core import setting_values as read

PREFIX = "PETSTORE_"


@dataclass(frozen=True)
class Setting:
    """One configurable value: its name without the PETSTORE_ prefix, default and help."""

    name: str
    default: str
    help: str
    parse: Callable[[str], Any] = str

    @property
    def env(self) -> str:
        return PREFIX + self.name

    @property
    def field(self) -> str:
        return self.name.lower()


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "DATABASE",
        "instance/petstore.db",
        "Where orders and keys live: a SQLite file's path (or sqlite:///path), or a "
        "PostgreSQL URL, postgresql://user:password@host:5432/dbname, which several hosts "
        "can share.",
        read.database,
    ),
    Setting(
        "DATABASE_POOL_SIZE",
        "10",
        "PostgreSQL only: most connections each worker process keeps open (one per handler "
        "thread is enough; workers x hosts x this must stay below max_connections).",
        read.positive_int,
    ),
    Setting(
        "DATABASE_CONNECT_TIMEOUT",
        "2",
        "PostgreSQL only: seconds a new connection may take (libpq's connect_timeout, per "
        "server of the URL; at least 2), unless the URL sets connect_timeout.",
        read.positive_int,
    ),
    Setting(
        "DATABASE_STATEMENT_TIMEOUT",
        "3",
        "PostgreSQL only: seconds a statement may run before the server cancels it "
        "(statement_timeout); a call the database has not answered one second after this "
        "has its connection closed, so a request never waits longer on a link that went "
        "silent (D41). Imports and migrations are not bounded.",
        read.positive_float,
    ),
    Setting(
        "DATABASE_POOL_TIMEOUT",
        "2",
        "PostgreSQL only: seconds a request waits for a free connection of its worker's "
        "pool before answering 503.",
        read.positive_float,
    ),
    Setting(
        "DATABASE_KEEPALIVES_IDLE",
        "2",
        "PostgreSQL only: seconds a connection may be silent before TCP keepalive probes "
        "start (libpq's keepalives_idle), unless the URL sets it.",
        read.positive_int,
    ),
    Setting(
        "DATABASE_KEEPALIVES_INTERVAL",
        "1",
        "PostgreSQL only: seconds between TCP keepalive probes (keepalives_interval), "
        "unless the URL sets it.",
        read.positive_int,
    ),
    Setting(
        "DATABASE_KEEPALIVES_COUNT",
        "3",
        "PostgreSQL only: unanswered keepalive probes after which the connection is "
        "closed (keepalives_count), unless the URL sets it.",
        read.positive_int,
    ),
    Setting(
        "DATABASE_TCP_USER_TIMEOUT",
        "5",
        "PostgreSQL only: seconds data sent to the server may stay unacknowledged before "
        "the kernel closes the connection (libpq's tcp_user_timeout), unless the URL sets "
        "it.",
        read.positive_float,
    ),
    Setting(
        "BUSY_TIMEOUT_MS",
        "1000",
        "How long a request waits for a database lock before answering 503 (0 to 1000).",
        read.busy_timeout,
    ),
    Setting(
        "KEY_CACHE_SECONDS",
        "2",
        "How long a worker trusts a looked-up API key; a revocation reaches every worker "
        "within this time, and so does a change of a key's plan, scope or expiry.",
        read.non_negative_float,
    ),
    Setting(
        "KEY_LAST_USED",
        "true",
        "Record when each key was last used (shown by `petstore keys list`, to the minute): "
        "each worker writes it at most once a minute per key, off the request's path.",
        read.boolean,
    ),
    Setting("BIND", "127.0.0.1:8080",
            "Address `petstore serve` listens on: HOST:PORT, [IPv6]:PORT or unix:PATH.", read.bind),
    Setting("WORKERS", "1", "Number of gunicorn worker processes for `petstore serve`.",
            read.positive_int),
    Setting(
        "HEAD_MAX_BYTES",
        "16384",
        "Largest request head (request line and headers) a worker reads; a larger one is "
        "answered 431 and its connection closed.",
        read.positive_int,
    ),
    Setting(
        "HEAD_TIMEOUT",
        "10",
        "Seconds a connection has to send a whole request head, from its opening or from "
        "the previous answer; then it is closed.",
        read.positive_float,
    ),
    Setting(
        "KEEPALIVE_TIMEOUT",
        "5",
        "Seconds a keep-alive connection may sit idle between requests before it is closed.",
        read.positive_int,
    ),
    Setting(
        "MAX_CONNECTIONS",
        "4096",
        "Open connections per worker. At the cap a new connection pushes out the one that "
        "has waited longest without a whole request head (or idled longest); never one "
        "being answered. Lowered to what the open-files limit leaves.",
        read.positive_int,
    ),
    Setting(
        "GRACEFUL_TIMEOUT",
        "30",
        "Seconds that requests in flight get to finish after SIGTERM before workers stop.",
        read.positive_int,
    ),
    Setting("LOG_LEVEL", "info", "Log level: debug, info, warning or error.", read.log_level),
    Setting("LOG_FORMAT", "json", "Log lines as json (one object a line) or text.",
            read.log_format),
    Setting(
        "FORWARDED_ALLOW_IPS",
        "127.0.0.1,::1",
        "Proxies trusted to set the client address through X-Forwarded-For (comma-separated "
        "addresses, or * for any); handed to the uvicorn worker.",
        read.networks,
    ),
    Setting(
        "CORS_ORIGINS",
        "",
        "Origins allowed to call the API from a browser (comma-separated, or *); empty "
        "turns CORS off.",
        read.origins,
    ),
    Setting("METRICS_ENABLED", "true", "Serve Prometheus metrics at /metrics.", read.boolean),
    Setting(
        "METRICS_ALLOW",
        "127.0.0.1,::1",
        "Addresses or networks (comma-separated, or *) that /metrics answers; others get 404.",
        read.networks,
    ),
    Setting(
        "CONSOLE_ALLOW",
        "127.0.0.1,::1",
        "Addresses or networks (comma-separated, or *) that the owner's console (/console/) "
        "answers; others get 403. Reach it from elsewhere through a proxy with TLS (see "
        "The console).",
        read.networks,
    ),
    Setting(
        "CONSOLE_HOSTS",
        "localhost,127.0.0.1,[::1]",
        "Host names (comma-separated, without a port: any port goes) that the console "
        "answers by, as the browser's Host header names them; any other Host gets 400 "
        "before anything else (D36: a page elsewhere cannot reach it by DNS rebinding). "
        "Behind a proxy, the public name the proxy passes on (shop.example).",
        read.hosts,
    ),
    Setting(
        "CONSOLE_IDLE_TIMEOUT",
        "1800",
        "Seconds a console session may go unused before it ends.",
        read.positive_int,
    ),
    Setting(
        "CONSOLE_ABSOLUTE_TIMEOUT",
        "43200",
        "Seconds after signing in that a console session ends, however busy.",
        read.positive_int,
    ),
    Setting(
        "CONSOLE_REQUIRE_TOTP",
        "false",
        "Every console user must enrol a second factor (an authenticator's codes, TOTP) "
        "before any page of the console opens; when false, one is offered after the "
        "first password change, and may be skipped.",
        read.boolean,
    ),
    Setting(
        "CONSOLE_AUDIT_DAYS",
        "90",
        "Days the console's audit log keeps each sign-in, failed sign-in and action; each "
        "worker removes older lines itself, when it starts and every hour after.",
        read.positive_int,
    ),
    Setting(
        "RATELIMIT_ENABLED",
        "true",
        "Count requests against per-plan quotas; false turns quotas and their headers off.",
        read.boolean,
    ),
    Setting(
        "RATELIMIT_STORAGE",
        "memory://",
        "Where quota counters live: memory:// (one process) or redis://host:6379/0 (also "
        "redis+sentinel://, redis+cluster://, and the other storages of the limits library).",
        read.storage,
    ),
    Setting(
        "ANONYMOUS_PLAN",
        "free",
        "The plan (from x-plans) whose numbers limit requests without a valid key, per "
        "client address.",
    ),
    Setting(
        "RATELIMIT_STORAGE_TIMEOUT",
        "0.5",
        "Seconds a quota check waits for the quota storage (connecting, and each answer) "
        "before treating it as failed (RATELIMIT_ON_ERROR).",
        read.positive_float,
    ),
    Setting(
        "RATELIMIT_STORAGE_HEALTH_CHECK",
        "10",
        "Seconds a connection to the quota storage may sit idle before it is checked with "
        "a PING ahead of its next use (Redis's health_check_interval); 0 checks none.",
        read.non_negative_int,
    ),
    Setting(
        "RATELIMIT_KEY_PREFIX",
        "petstore",
        "Prefix of every counter in the quota storage, so deployments can share one Redis.",
    ),
    Setting(
        "RATELIMIT_ON_ERROR",
        "fallback",
        "When the quota storage fails: fallback counts in process memory until it returns; "
        "closed answers 503.",
        read.on_error,
    ),
    Setting(
        "BAN_AFTER",
        "10",
        "Violations (requests within an earlier 429's Retry-After) that ban a key.",
        read.positive_int,
    ),
    Setting("BAN_WINDOW", "600", "Seconds within which BAN_AFTER violations ban a key.",
            read.positive_int),
    Setting("BAN_SECONDS", "900", "How long a ban lasts, in seconds; 0 turns bans off.",
            read.non_negative_int),
    Setting(
        "LIST_CACHE_BYTES",
        "67108864",
        "Largest encoded order list a worker keeps between changes (bytes; 0 keeps none).",
        read.non_negative_int,
    ),
    Setting(
        "PAGE_CACHE_BYTES",
        "16777216",
        "Bytes of answers to the order GETs (v1's list when it fits, v2's pages and single "
        "orders) a worker keeps until an order changes (0 keeps none).",
        read.non_negative_int,
    ),
    Setting(
        "FEED_MAX_WAITING",
        "1000",
        "Requests of the feed of changed orders that one worker holds waiting for a change "
        "(`wait`); beyond it a request is answered at once with what there is (0: none "
        "waits).",
        read.non_negative_int,
    ),
    Setting(
        "WEBHOOKS_ENABLED",
        "true",
        "Run a deliverer of webhooks in each worker of this host; false on "
        "a host that should only answer requests (the endpoints are still served).",
        read.boolean,
    ),
    Setting(
        "WEBHOOK_TIMEOUT",
        "10",
        "Seconds one attempt to deliver a webhook message may take (connecting, sending and "
        "the answer); then it counts as failed and is retried on the schedule.",
        read.positive_float,
    ),
    Setting(
        "WEBHOOK_LEASE_SECONDS",
        "30",
        "How long a worker holds a webhook endpoint between renewals: a worker that dies "
        "mid-attempt leaves its endpoints to another within this time (the same message "
        "is then sent again, with the same webhook-id).",
        read.positive_float,
    ),
    Setting(
        "WEBHOOK_ATTEMPTS_KEPT_DAYS",
        "30",
        "Days the log of delivery attempts (GET .../deliveries) keeps each attempt.",
        read.positive_int,
    ),
    Setting(
        "WEBHOOK_ALLOWED_NETWORKS",
        "",
        "Addresses or networks (comma-separated, e.g. 127.0.0.0/8) that webhook URLs may "
        "reach although they are not global (loopback, private, link-local...); empty: "
        "only global addresses.",
        read.networks,
    ),
    Setting(
        "GZIP_LEVEL",
        "5",
        "gzip level (1 fastest to 9 smallest) for responses of 1 kB or more to clients "
        "that accept it; 0 turns compression off.",
        read.gzip_level,
    ),
    Setting(
        "VALIDATE_RESPONSES",
        "false",
        "Check every answer, whichever layer made it, against the OpenAPI document (slow;"
        " the tests turn it on).",
        read.boolean,
    ),
)


class SettingsError(ValueError):
    """A PETSTORE_* variable has a value that cannot be used."""


def _default(name: str) -> Any:
    setting = next(s for s in SETTINGS if s.name == name)
    return setting.parse(setting.default)


@dataclass(frozen=True)
class Settings:
    """The service's configuration; build it with from_env() or directly in tests."""

    database: str = _default("DATABASE")
    database_pool_size: int = _default("DATABASE_POOL_SIZE")
    database_connect_timeout: int = _default("DATABASE_CONNECT_TIMEOUT")
    database_statement_timeout: float = _default("DATABASE_STATEMENT_TIMEOUT")
    database_pool_timeout: float = _default("DATABASE_POOL_TIMEOUT")
    database_keepalives_idle: int = _default("DATABASE_KEEPALIVES_IDLE")
    database_keepalives_interval: int = _default("DATABASE_KEEPALIVES_INTERVAL")
    database_keepalives_count: int = _default("DATABASE_KEEPALIVES_COUNT")
    database_tcp_user_timeout: float = _default("DATABASE_TCP_USER_TIMEOUT")
    busy_timeout_ms: int = _default("BUSY_TIMEOUT_MS")
    key_cache_seconds: float = _default("KEY_CACHE_SECONDS")
    key_last_used: bool = _default("KEY_LAST_USED")
    bind: str = _default("BIND")
    workers: int = _default("WORKERS")
    head_max_bytes: int = _default("HEAD_MAX_BYTES")
    head_timeout: float = _default("HEAD_TIMEOUT")
    keepalive_timeout: int = _default("KEEPALIVE_TIMEOUT")
    max_connections: int = _default("MAX_CONNECTIONS")
    graceful_timeout: int = _default("GRACEFUL_TIMEOUT")
    log_level: str = _default("LOG_LEVEL")
    log_format: str = _default("LOG_FORMAT")
    forwarded_allow_ips: str = _default("FORWARDED_ALLOW_IPS")
    cors_origins: str = _default("CORS_ORIGINS")
    metrics_enabled: bool = _default("METRICS_ENABLED")
    metrics_allow: str = _default("METRICS_ALLOW")
    console_allow: str = _default("CONSOLE_ALLOW")
    console_hosts: str = _default("CONSOLE_HOSTS")
    console_idle_timeout: int = _default("CONSOLE_IDLE_TIMEOUT")
    console_absolute_timeout: int = _default("CONSOLE_ABSOLUTE_TIMEOUT")
    console_require_totp: bool = _default("CONSOLE_REQUIRE_TOTP")
    console_audit_days: int = _default("CONSOLE_AUDIT_DAYS")
    ratelimit_enabled: bool = _default("RATELIMIT_ENABLED")
    ratelimit_storage: str = _default("RATELIMIT_STORAGE")
    anonymous_plan: str = _default("ANONYMOUS_PLAN")
    ratelimit_storage_timeout: float = _default("RATELIMIT_STORAGE_TIMEOUT")
    ratelimit_storage_health_check: int = _default("RATELIMIT_STORAGE_HEALTH_CHECK")
    ratelimit_key_prefix: str = _default("RATELIMIT_KEY_PREFIX")
    ratelimit_on_error: str = _default("RATELIMIT_ON_ERROR")
    ban_after: int = _default("BAN_AFTER")
    ban_window: int = _default("BAN_WINDOW")
    ban_seconds: int = _default("BAN_SECONDS")
    list_cache_bytes: int = _default("LIST_CACHE_BYTES")
    page_cache_bytes: int = _default("PAGE_CACHE_BYTES")
    feed_max_waiting: int = _default("FEED_MAX_WAITING")
    webhooks_enabled: bool = _default("WEBHOOKS_ENABLED")
    webhook_timeout: float = _default("WEBHOOK_TIMEOUT")
    webhook_lease_seconds: float = _default("WEBHOOK_LEASE_SECONDS")
    webhook_attempts_kept_days: int = _default("WEBHOOK_ATTEMPTS_KEPT_DAYS")
    webhook_allowed_networks: str = _default("WEBHOOK_ALLOWED_NETWORKS")
    gzip_level: int = _default("GZIP_LEVEL")
    validate_responses: bool = _default("VALIDATE_RESPONSES")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every setting from PETSTORE_* variables, falling back to its default."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            text = environ.get(setting.env, setting.default)
            try:
                values[setting.field] = setting.parse(text)
            except ValueError as exc:
                raise SettingsError(f"{setting.env}={text!r}: {exc}") from None
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with some values changed."""
        return dataclasses.replace(self, **changes)


def _check_table_matches_fields() -> None:
    fields = {f.name for f in dataclasses.fields(Settings)}
    declared = {s.field for s in SETTINGS}
    assert fields == declared, f"Settings fields and SETTINGS differ: {fields ^ declared}"


_check_table_matches_fields()
