"""Handlers of the v2 operations tagged `webhooks` (D28): a key's webhook endpoints. The
rules are app.core.webhooks'; the deliverer (app/web/deliverer.py) sends the messages."""

from __future__ import annotations

from typing import Any

import orjson
from connexion.lifecycle import ConnexionResponse

from app.core import problems, webhook_urls, webhooks
from app.core.errors import InvalidParameter
from app.outbound import send_test
from app.web.handlers import json_response, no_content, request_path, services


def _json(value: Any, status: int = 200,
          headers: dict[str, str] | None = None) -> ConnexionResponse:
    return json_response(status, orjson.dumps(value), headers)


def _object(body: Any) -> dict[str, Any]:
    """The request's body, if it is a JSON object. Without a JSON Content-Type, Connexion
    hands over the (validated) body as bytes, as shipOrder's handler also finds."""
    if isinstance(body, bytes):
        try:
            body = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError:
            body = None
    if isinstance(body, dict):
        return body
    raise InvalidParameter(problems.BODY, "type", {"type": "object"})


def _allowed() -> tuple[webhook_urls.Network, ...]:
    return webhook_urls.networks(services().settings.webhook_allowed_networks)


def create_webhook_endpoint(body: dict[str, Any], token_info: dict[str, Any]) -> ConnexionResponse:
    """POST /webhook-endpoints: a new endpoint and its secret, shown this once."""
    body = _object(body)
    endpoint, secret = webhooks.create(services().store, token_info["key_id"], body.get("url"),
                                       body.get("types"), body.get("description"), _allowed())
    return _json({**webhooks.view(endpoint), "secret": secret}, 201,
                 {"Location": f"{request_path()}/{endpoint.id}"})


def list_webhook_endpoints(token_info: dict[str, Any]) -> ConnexionResponse:
    """GET /webhook-endpoints: the key's endpoints."""
    found = webhooks.endpoints(services().store, token_info["key_id"])
    return _json({"endpoints": [webhooks.view(endpoint) for endpoint in found]})


def get_webhook_endpoint(endpointId: int, token_info: dict[str, Any]) -> ConnexionResponse:
    """GET /webhook-endpoints/{endpointId}."""
    return _json(webhooks.view(webhooks.find(services().store, token_info["key_id"],
                                             endpointId)))


def update_webhook_endpoint(endpointId: int, body: dict[str, Any],
                            token_info: dict[str, Any]) -> ConnexionResponse:
    """PATCH /webhook-endpoints/{endpointId}: url, types, description, enabled."""
    endpoint = webhooks.update(services().store, token_info["key_id"], endpointId,
                               _object(body), _allowed())
    return _json(webhooks.view(endpoint))


def delete_webhook_endpoint(endpointId: int, token_info: dict[str, Any]) -> ConnexionResponse:
    """DELETE /webhook-endpoints/{endpointId}."""
    webhooks.delete(services().store, token_info["key_id"], endpointId)
    return no_content()


def rotate_webhook_endpoint_secret(endpointId: int, token_info: dict[str, Any],
                                   body: Any = None) -> ConnexionResponse:
    """POST /webhook-endpoints/{endpointId}/rotate-secret: a new secret, the old one
    signing beside it for the grace."""
    grace = _object(body or {}).get("graceSeconds", webhooks.GRACE_DEFAULT)
    endpoint, secret = webhooks.rotate(services().store, token_info["key_id"], endpointId,
                                       grace)
    return _json({**webhooks.view(endpoint), "secret": secret})


def list_webhook_deliveries(endpointId: int, token_info: dict[str, Any],
                            limit: int = webhooks.DELIVERIES_LIMIT_DEFAULT,
                            cursor: str | None = None) -> ConnexionResponse:
    """GET /webhook-endpoints/{endpointId}/deliveries: the attempts, newest first."""
    found, following = webhooks.deliveries(services().store, token_info["key_id"],
                                           endpointId, cursor, limit)
    return _json({"deliveries": [webhooks.attempt_view(a) for a in found], "next": following})


def replay_webhook_endpoint(endpointId: int, token_info: dict[str, Any],
                            body: Any = None) -> ConnexionResponse:
    """POST /webhook-endpoints/{endpointId}/replay: deliver again after a feed cursor."""
    after = _object(body or {}).get("after")
    endpoint = webhooks.replay(services().store, token_info["key_id"], endpointId, after)
    return _json(webhooks.view(endpoint), 202)


def test_webhook_endpoint(endpointId: int, token_info: dict[str, Any]) -> ConnexionResponse:
    """POST /webhook-endpoints/{endpointId}/test: one ping, sent now, and how it went."""
    found = services()
    endpoint = webhooks.find(found.store, token_info["key_id"], endpointId)
    msg_id, outcome = send_test(found.store, endpoint, found.settings.webhook_timeout,
                                _allowed())
    return _json(webhooks.test_result(msg_id, outcome))
