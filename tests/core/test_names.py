"""The rule of names people read (D37), without a store: what it refuses is exactly
Unicode's control characters (category Cc) and the direction embeddings, overrides and
isolates; everything else a name may hold in any script is taken; and a name stored before
the rule is shown escaped, meaning the same."""

from __future__ import annotations

import json
import sys
import unicodedata

import pytest

from app.core import names, problems
from app.core.errors import InvalidParameter
from tests.support import text_id

DIRECTION = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]


def test_the_rule_refuses_exactly_the_controls_and_the_direction_characters() -> None:
    refused = {code for code in range(sys.maxunicode + 1)
               if names.UNREADABLE.match(chr(code))}
    controls = {code for code in range(sys.maxunicode + 1)
                if unicodedata.category(chr(code)) == "Cc"}
    assert refused == controls | set(DIRECTION)


@pytest.mark.parametrize("text", ["\u202egnp.exe", "Rex\x00", "\x1b[31mRex", "a\r\nb",
                                  "a\tb", "\x7f", "\x9b2J", "\u2068Rex"], ids=text_id)
def test_a_name_with_one_of_them_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidParameter) as refused:
        names.readable(text, "category")
    assert refused.value.param == "category" and refused.value.rule == "readable_text"
    assert refused.value.sentence == problems.sentence("category", "readable_text")


@pytest.mark.parametrize("text", ["Rex", "Ren\u00e9e", "\u05e8\u05e7\u05e1 (Rex)",
                                  "\u0631\u0643\u0633", "\u72ac", "\U0001f415\u200d\U0001f9ba",
                                  "caf\u0065\u0301", "a\u00a0b", "left\u200eright", "C:\\dir",
                                  ""], ids=text_id)
def test_text_in_any_script_with_marks_and_joiners_is_taken(text: str) -> None:
    assert names.readable(text, "name") == text


def test_a_stored_name_is_shown_escaped_and_its_json_means_the_same() -> None:
    stored = "\u202egnp.exe\x1b[2J\x85\tRen\u00e9e"
    assert names.shown(stored) == "\\u202egnp.exe\\x1b[2J\\x85\\tRen\u00e9e"
    text = json.dumps({"name": stored}, ensure_ascii=False)
    shown = names.json_shown(text)
    assert not names.UNREADABLE.search(shown)
    assert json.loads(shown) == {"name": stored}
