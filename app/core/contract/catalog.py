"""The catalogue of the contract review: every rule it applies, by oasdiff's rule id and
level (checker/rules.go and the messages of oasdiff's checker), so that a reviewer can look a
finding up where those ids are documented (D29); and the finding itself."""

from __future__ import annotations

from dataclasses import asdict, dataclass

ERR, WARN, INFO = "ERR", "WARN", "INFO"
SEVERITY = {INFO: 0, WARN: 1, ERR: 2}

#: Every rule the review applies: oasdiff's id and level.
RULES: dict[str, str] = {
    # Paths and operations
    "endpoint-added": INFO,
    "endpoint-deprecated": INFO,
    "api-deprecated-sunset-parse": ERR,
    "api-sunset-date-too-small": ERR,
    "endpoint-reactivated": INFO,
    "webhook-added": INFO,
    "webhook-removed": ERR,
    "api-path-removed-without-deprecation": ERR,
    "api-path-removed-with-deprecation": INFO,
    "api-path-removed-before-sunset": ERR,
    "api-path-sunset-parse": ERR,
    "api-removed-without-deprecation": ERR,
    "api-removed-with-deprecation": INFO,
    "api-removed-before-sunset": ERR,
    # Security
    "api-security-added": INFO,
    "api-security-removed": INFO,
    "api-security-scope-added": INFO,
    "api-security-scope-removed": INFO,
    "api-global-security-added": INFO,
    "api-global-security-removed": INFO,
    "api-global-security-scope-added": INFO,
    "api-global-security-scope-removed": INFO,
    # Request parameters
    "new-required-request-parameter": ERR,
    "new-optional-request-parameter": INFO,
    "new-request-path-parameter": ERR,
    "request-parameter-removed": WARN,
    "request-parameter-became-required": ERR,
    "request-parameter-became-optional": INFO,
    "request-parameter-type-changed": ERR,
    "request-parameter-type-generalized": INFO,
    "request-parameter-became-nullable": INFO,
    "request-parameter-became-not-nullable": ERR,
    "request-parameter-became-enum": ERR,
    "request-parameter-enum-value-removed": ERR,
    "request-parameter-enum-value-added": INFO,
    "request-parameter-min-increased": ERR,
    "request-parameter-min-decreased": INFO,
    "request-parameter-min-set": WARN,
    "request-parameter-max-decreased": ERR,
    "request-parameter-max-increased": INFO,
    "request-parameter-max-set": WARN,
    "request-parameter-min-length-increased": ERR,
    "request-parameter-min-length-decreased": INFO,
    "request-parameter-max-length-decreased": ERR,
    "request-parameter-max-length-increased": INFO,
    "request-parameter-max-length-set": WARN,
    "request-parameter-min-items-increased": ERR,
    "request-parameter-min-items-decreased": INFO,
    "request-parameter-min-items-set": WARN,
    "request-parameter-max-items-decreased": ERR,
    "request-parameter-max-items-increased": INFO,
    "request-parameter-pattern-added": WARN,
    "request-parameter-pattern-changed": WARN,
    "request-parameter-pattern-removed": INFO,
    # Request bodies
    "request-body-added-required": ERR,
    "request-body-added-optional": INFO,
    "request-body-removed": ERR,
    "request-body-became-required": ERR,
    "request-body-became-optional": INFO,
    "request-body-media-type-removed": ERR,
    "request-body-media-type-added": INFO,
    "request-body-type-changed": ERR,
    "request-body-type-generalized": INFO,
    "request-body-became-nullable": INFO,
    "request-body-became-not-nullable": ERR,
    "request-body-became-enum": ERR,
    "request-body-enum-value-removed": ERR,
    "request-body-min-increased": ERR,
    "request-body-min-decreased": INFO,
    "request-body-min-set": WARN,
    "request-body-max-decreased": ERR,
    "request-body-max-increased": INFO,
    "request-body-max-set": WARN,
    "request-body-min-length-increased": ERR,
    "request-body-min-length-decreased": INFO,
    "request-body-max-length-decreased": ERR,
    "request-body-max-length-increased": INFO,
    "request-body-max-length-set": WARN,
    "request-body-min-items-increased": ERR,
    "request-body-min-items-set": WARN,
    # Request body properties
    "new-required-request-property": ERR,
    "new-required-request-property-with-default": INFO,
    "new-optional-request-property": INFO,
    "request-property-removed": WARN,
    "request-property-became-required": ERR,
    "request-property-became-required-with-default": INFO,
    "request-property-became-optional": INFO,
    "request-property-type-changed": ERR,
    "request-property-type-generalized": INFO,
    "request-property-became-nullable": INFO,
    "request-property-became-not-nullable": ERR,
    "request-property-became-enum": ERR,
    "request-property-enum-value-removed": ERR,
    "request-property-enum-value-added": INFO,
    "request-property-min-increased": ERR,
    "request-property-min-decreased": INFO,
    "request-property-min-set": WARN,
    "request-property-max-decreased": ERR,
    "request-property-max-increased": INFO,
    "request-property-max-set": WARN,
    "request-property-min-length-increased": ERR,
    "request-property-min-length-decreased": INFO,
    "request-property-max-length-decreased": ERR,
    "request-property-max-length-increased": INFO,
    "request-property-max-length-set": WARN,
    "request-property-min-items-increased": ERR,
    "request-property-min-items-set": WARN,
    "request-property-pattern-added": WARN,
    "request-property-pattern-changed": WARN,
    "request-property-pattern-removed": INFO,
    # Responses
    "response-success-status-removed": ERR,
    "response-success-status-added": INFO,
    "response-non-success-status-removed": INFO,
    "response-non-success-status-added": INFO,
    "response-media-type-removed": ERR,
    "response-media-type-added": INFO,
    "required-response-header-removed": ERR,
    "optional-response-header-removed": WARN,
    "response-header-became-optional": ERR,
    "response-header-added": INFO,
    "response-body-type-changed": ERR,
    "response-body-became-nullable": ERR,
    "response-body-became-not-nullable": INFO,
    "response-body-max-increased": ERR,
    "response-body-min-decreased": ERR,
    "response-body-max-length-increased": ERR,
    "response-body-max-length-unset": ERR,
    "response-body-min-length-decreased": ERR,
    "response-body-min-items-decreased": ERR,
    "response-body-min-items-unset": ERR,
    # Response body properties
    "response-required-property-removed": ERR,
    "response-optional-property-removed": WARN,
    "response-required-property-added": INFO,
    "response-optional-property-added": INFO,
    "response-property-became-optional": ERR,
    "response-property-became-required": INFO,
    "response-property-became-nullable": ERR,
    "response-property-became-not-nullable": INFO,
    "response-property-type-changed": ERR,
    "response-property-enum-value-added": WARN,
    "response-property-enum-value-removed": INFO,
    "response-property-max-increased": ERR,
    "response-property-min-decreased": ERR,
    "response-property-max-length-increased": ERR,
    "response-property-max-length-unset": ERR,
    "response-property-min-length-decreased": ERR,
    "response-property-min-items-decreased": ERR,
    "response-property-min-items-unset": ERR,
    "response-property-pattern-added": INFO,
    "response-property-pattern-changed": INFO,
    "response-property-pattern-removed": INFO,
}


@dataclass(frozen=True)
class Finding:
    """One change between base and revision: oasdiff's rule id and level, the operation
    (`GET /store/orders`; '' for the whole document) and its path, a sentence, and the
    FILE:LINE it is about (the revision's, or the base's for what was removed)."""

    id: str
    level: str
    operation: str
    path: str
    text: str
    source: str

    def as_dict(self) -> dict[str, str]:
        """The finding as the JSON format prints it."""
        return asdict(self)

