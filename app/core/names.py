"""Names people read (D37): a pet's name, category and tags, an API key's name, a webhook
endpoint's description. Each is text for a person to read, so it holds no character that
steers the screen it is read on rather than showing: a control character (Unicode's
category Cc: NUL, a tab, a line break, ESC and the C1 controls, with which a name can
rewrite a terminal or a log line) or a bidirectional embedding, override or isolate
(U+202A to U+202E, U+2066 to U+2069, with which "\\u202egnp.exe" reads "exe.png").

readable is the one rule, called by the core's rules that the API, the console and the
CLI share (app.core.pets, app.core.keys, app.core.webhooks); each edge says its refusal
its way. Only writes refuse: a name stored before (by an earlier version, a hand edit)
still reads and lists as it is, and the CLI prints it with those characters escaped
(shown). A console user's name is held to letters, digits and . _ @ - already
(app.core.users.accounts), which holds none of them.
"""

from __future__ import annotations

import re

from app.core.errors import InvalidParameter

# Category Cc is exactly U+0000-U+001F and U+007F-U+009F (a test holds it to
# unicodedata); then the embeddings and overrides, and the isolates.
UNREADABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
RULE = "readable_text"  # app.core.problems' sentence of the refusal


def readable(value: str, field: str) -> str:
    """value, when it holds no character UNREADABLE finds; else InvalidParameter naming
    field as the client sent it (name, category, tags, description)."""
    if UNREADABLE.search(value):
        raise InvalidParameter(field, RULE)
    return value


SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(found: re.Match[str]) -> str:
    char = found.group()
    if char in SHORT_ESCAPES:
        return SHORT_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """text for a terminal: each character UNREADABLE finds written as Python writes it in
    a string's repr (\\x1b, \\t, \\u202e), the rest as it is."""
    return UNREADABLE.sub(_escape, text)


def _json_escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def json_shown(text: str) -> str:
    """JSON text for a terminal, meaning the same: each character UNREADABLE finds (only
    inside a string, where JSON takes any character but C0 controls, which encoders escape
    already) written as its \\u escape."""
    return UNREADABLE.sub(_json_escape, text)
