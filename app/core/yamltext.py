"""YAML read safely, and fast where it can be: PyYAML's C parser (libyaml, which PyPI's
wheels carry) with the same safe constructors as yaml.safe_load, or its pure-Python
SafeLoader where the installed PyYAML was built without libyaml. The OpenAPI documents are
read at every worker's start and by every app a test builds; the pure-Python parser took
most of an app's building (docs/performance.md)."""

from __future__ import annotations

from typing import IO, Any

import yaml

SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str | bytes | IO[str] | IO[bytes]) -> Any:
    """yaml.safe_load's answer, through SafeLoader."""
    return yaml.load(text, Loader=SafeLoader)  # SafeLoader: a safe loader, C or Python
