"""Prometheus metrics, correct across gunicorn workers (prometheus-client's multiprocess
mode, switched on by PROMETHEUS_MULTIPROC_DIR, which `petstore serve` sets)."""

from __future__ import annotations

import ipaddress
import os
import shutil
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.core.storage import Store

REQUESTS = Counter("petstore_requests", "Requests answered, by operation (path template) "
                   "and status.", ["method", "path", "status"])
LATENCY = Histogram("petstore_request_duration_seconds", "Time to answer a request.",
                    ["method", "path"])
REFUSED = Counter("petstore_quota_refusals", "Requests refused with 429, by reason "
                  "(rate_limit_exceeded, api_key_banned).", ["reason"])
BANS = Counter("petstore_bans", "API keys banned for repeated requests after 429s.")
QUOTA_STORAGE_ERRORS = Counter("petstore_quota_storage_errors",
                               "Failed calls to the quota storage (Redis).")
CONNECTIONS_CLOSED = Counter(
    "petstore_connections_closed", "Connections a worker closed to bound what one client "
    "holds, by reason: head_timeout, head_too_large (431), evicted (pushed "
    "out at the cap by a new one), refused (at the cap, with none to push out).", ["reason"])
ACCEPT_FAILURES = Counter("petstore_accept_failures",
                          "Failed accepts of a new connection (out of file descriptors, ...).")
# A live gauge: each worker adds 1 while it lives. A worker that dies (killed, or recycled by
# gunicorn) is retired by worker_exited, so the sum counts the workers serving now.
WORKERS = Gauge("petstore_workers", "Worker processes serving now.",
                multiprocess_mode="livesum")

# Feed requests held by long polling (D26) now, summed over the live workers: what an
# operator reads against PETSTORE_FEED_MAX_WAITING, and what a test waits on.
FEED_WAITING = Gauge("petstore_feed_waiting", "Feed requests waiting for a change now "
                     "(long polling).", multiprocess_mode="livesum")

# Webhooks (D28). Attempts by outcome: delivered (2xx), refused (another status), gone
# (410), no_answer (a timeout, a refused address, a network error). Lag: per endpoint, how
# long the oldest change not yet delivered to it has waited (0 when it is up to date), as
# the worker that holds the endpoint sees it.
WEBHOOK_ATTEMPTS = Counter("petstore_webhook_attempts", "Attempts to deliver a webhook "
                           "message, by outcome (delivered, refused, gone, no_answer).",
                           ["outcome"])
WEBHOOK_LAG = Gauge("petstore_webhook_lag_seconds", "Per webhook endpoint, the age of the "
                    "oldest change not yet delivered to it.", ["endpoint"],
                    multiprocess_mode="livemax")

# (method, path template, status) -> the labelled counter and histogram. Requests take a
# handful of distinct label sets; prometheus-client's labels() checks and locks each time.
_CHILDREN: dict[tuple[str, str, int], tuple[Any, Any]] = {}


def observe_request(method: str, template: str, status: int, seconds: float) -> None:
    """Count one answered request and its duration."""
    children = _CHILDREN.get((method, template, status))
    if children is None:
        children = _CHILDREN[(method, template, status)] = (
            REQUESTS.labels(method, template, str(status)), LATENCY.labels(method, template))
    children[0].inc()
    children[1].observe(seconds)


class OrdersByStatus(Collector):
    """How many orders each status holds, read from the store at scrape time."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("petstore_orders", "Orders in the store, by status.",
                                   labels=["status"])
        for status, count in self.store.count_by_status().items():
            family.add_metric([status], count)
        yield family


class WebhookEndpointsByState(Collector):
    """How many webhook endpoints are enabled (up to date or retrying) and disabled, read
    from the store at scrape time."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("petstore_webhook_endpoints", "Webhook endpoints, by "
                                   "state (delivering, retrying, disabled).", labels=["state"])
        counts = dict.fromkeys(("delivering", "retrying", "disabled"), 0)
        for endpoint in self.store.list_webhook_endpoints():
            state = ("disabled" if not endpoint.enabled
                     else "retrying" if endpoint.attempt else "delivering")
            counts[state] += 1
        for state, count in counts.items():
            family.add_metric([state], count)
        yield family


def render(store: Store) -> tuple[bytes, str]:
    """The exposition text of every metric, summed over all workers in multiprocess mode."""
    registry = CollectorRegistry()
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        multiprocess.MultiProcessCollector(registry)
    else:
        for metric in (REQUESTS, LATENCY, REFUSED, BANS, QUOTA_STORAGE_ERRORS, WORKERS,
                       CONNECTIONS_CLOSED, ACCEPT_FAILURES, FEED_WAITING, WEBHOOK_ATTEMPTS,
                       WEBHOOK_LAG):
            registry.register(metric)
    registry.register(OrdersByStatus(store))
    registry.register(WebhookEndpointsByState(store))
    return generate_latest(registry), CONTENT_TYPE_LATEST


def allowed(address: str | None, allow: str) -> bool:
    """Whether PETSTORE_METRICS_ALLOW (addresses or networks, or *) admits address."""
    entries = [entry.strip() for entry in allow.split(",") if entry.strip()]
    if "*" in entries:
        return True
    try:
        client = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    for entry in entries:
        try:
            if client in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def worker_started() -> None:
    """gunicorn's post_worker_init hook: this worker counts in petstore_workers."""
    WORKERS.set(1)


def worker_exited(pid: int) -> None:
    """gunicorn's child_exit hook: retire a dead worker's live gauges (its files of them),
    with prometheus-client's own multiprocess API. Its counters and histograms stay, so
    that totals never go back."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        multiprocess.mark_process_dead(pid)


# The folder `petstore serve` makes for the metrics of one run, when the operator chose none:
# it carries this file, and the master removes it when it exits.
MADE_FOR_THIS_RUN = ".made-by-petstore-serve"


def remove_folder_made_for_this_run() -> None:
    """Remove PROMETHEUS_MULTIPROC_DIR if `petstore serve` made it (never one the operator
    set): every worker's files go with it."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder and os.path.exists(os.path.join(folder, MADE_FOR_THIS_RUN)):
        shutil.rmtree(folder, ignore_errors=True)
