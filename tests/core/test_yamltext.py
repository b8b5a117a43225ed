"""The documents read with libyaml's parser (app/core/yamltext.py) are what PyYAML's own
safe_load reads: the same values, the same safe constructors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.core import yamltext
from app.web.routing import OPENAPI_DIR
from tests.support import unavailable


def test_the_c_parser_is_used_where_pyyaml_has_it() -> None:
    if not yaml.__with_libyaml__:
        unavailable("this PyYAML was built without libyaml: the pure-Python parser is used")
    assert yamltext.SafeLoader is yaml.CSafeLoader


@pytest.mark.parametrize("document", sorted(OPENAPI_DIR.rglob("*.yaml")),
                         ids=lambda path: str(path.relative_to(OPENAPI_DIR)))
def test_every_document_reads_as_safe_load_reads_it(document: Path) -> None:
    text = document.read_text()
    assert yamltext.safe_load(text) == yaml.safe_load(text)


def test_nothing_but_plain_data_is_constructed() -> None:
    with pytest.raises(yaml.constructor.ConstructorError):
        yamltext.safe_load("!!python/object/apply:os.system ['true']")
