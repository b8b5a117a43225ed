"""Reading an OpenAPI 3.0/3.1 document for the contract review: YAML with the line of every
mapping and key kept, `$ref`s inside the document followed, and `allOf` merged.

Pure Python over PyYAML (libyaml's parser when it is there, for speed): each mapping is
a `YMap`, a dict that also knows its own line and the line of each of its keys, so that a
finding can name the line of the YAML it is about.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: The versions of OpenAPI the review reads (Swagger 2.0 and OpenAPI 3.2 are refused).
_OPENAPI_VERSION = re.compile(r"^3\.[01](\.\d+)?$")


class ContractError(Exception):
    """A document that cannot be reviewed: it does not parse, is not OpenAPI 3.0/3.1, or
    has a `$ref` that leads nowhere. The message names the file and the line."""

    def __init__(self, file: str, line: int, problem: str) -> None:
        super().__init__(f"{file}:{line}: {problem}")
        self.file = file
        self.line = line
        self.problem = problem


class YMap(dict[Any, Any]):
    """A YAML mapping that remembers its line and the line of each of its keys (1-based)."""

    __slots__ = ("key_lines", "line")

    def __init__(self, line: int = 0) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[Any, int] = {}

    def line_of(self, key: Any) -> int:
        """The line of key, or this mapping's own line when key is not in it."""
        return self.key_lines.get(key, self.line)


class _LineLoader(_BaseLoader):
    """PyYAML's safe loader, building YMaps."""


def _construct_map(loader: Any, node: yaml.MappingNode) -> Iterator[YMap]:
    data = YMap(node.start_mark.line + 1)
    yield data
    data.update(loader.construct_mapping(node))  # flattens `<<` merge keys into node.value
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        data.key_lines.setdefault(key, key_node.start_mark.line + 1)


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)


class Document:
    """One OpenAPI document as read from file: its root mapping, and how to follow its
    `$ref`s and merge its `allOf`s."""

    def __init__(self, file: str, root: YMap) -> None:
        self.file = file
        self.root = root
        self._merged: dict[int, YMap] = {}

    @property
    def version(self) -> str:
        """info.version, or '' when the document has none."""
        info = self.root.get("info")
        return str(info.get("version", "")) if isinstance(info, dict) else ""

    @property
    def title(self) -> str:
        """info.title, or '' when the document has none."""
        info = self.root.get("info")
        return str(info.get("title", "")) if isinstance(info, dict) else ""

    def where(self, line: int) -> str:
        """FILE:LINE of this document."""
        return f"{self.file}:{line}"

    def resolve(self, node: Any) -> Any:
        """node, or what its `$ref` (and the `$ref`s that leads to) points at."""
        seen: list[str] = []
        while isinstance(node, YMap) and "$ref" in node:
            ref = node["$ref"]
            line = node.line_of("$ref")
            if not isinstance(ref, str) or not ref.startswith("#"):
                raise ContractError(self.file, line, f"$ref {ref!r} is not inside this document "
                                    "(the review follows only refs that begin with #)")
            if ref in seen:
                raise ContractError(self.file, line, f"$ref {ref} leads back to itself")
            seen.append(ref)
            node = self._pointer(ref, line)
        return node

    def schema(self, node: Any) -> YMap | None:
        """The schema node stands for: its `$ref`s followed and its `allOf` merged into one
        mapping (properties and required joined, the tighter of two bounds kept)."""
        node = self.resolve(node)
        if not isinstance(node, YMap):
            return None
        if "allOf" not in node:
            return node
        merged = self._merged.get(id(node))
        if merged is None:
            merged = self._merge_all_of(node)
            self._merged[id(node)] = merged
        return merged

    def _pointer(self, ref: str, line: int) -> Any:
        node: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise ContractError(self.file, line, f"$ref {ref} points at nothing")
        return node

    def _merge_all_of(self, node: YMap) -> YMap:
        merged = YMap(node.line)
        parts = node["allOf"] if isinstance(node["allOf"], list) else []
        own = YMap(node.line)
        for key, value in node.items():
            if key != "allOf":
                own[key] = value
                own.key_lines[key] = node.line_of(key)
        # Marking the node first stops an allOf that refers back to it from looping.
        self._merged[id(node)] = merged
        for part in [*(self.schema(p) for p in parts), own]:
            if part is not None:
                _merge_into(merged, part)
        return merged


_TIGHTER = {"minimum": max, "minLength": max, "minItems": max,
            "maximum": min, "maxLength": min, "maxItems": min}


def _merge_into(merged: YMap, part: YMap) -> None:
    for key, value in part.items():
        line = part.line_of(key)
        if key == "properties" and isinstance(value, dict):
            props = merged.get("properties")
            if not isinstance(props, YMap):
                props = merged["properties"] = YMap(line)
                merged.key_lines[key] = line
            for name, prop in value.items():
                props[name] = prop
                props.key_lines[name] = value.line_of(name) if isinstance(value, YMap) else line
        elif key == "required" and isinstance(value, list):
            required = list(merged.get("required", []))
            merged["required"] = required + [name for name in value if name not in required]
            merged.key_lines.setdefault(key, line)
        elif key in _TIGHTER and key in merged and _is_number(value) and _is_number(merged[key]):
            tighter = _TIGHTER[key](merged[key], value)
            if tighter == value:
                merged[key] = value
                merged.key_lines[key] = line
        elif key not in merged:
            merged[key] = value
            merged.key_lines[key] = line


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def load_document(file: str | Path, text: str | None = None) -> Document:
    """Read the OpenAPI 3.0/3.1 document in file (or text, named file); raise ContractError
    naming the file and line when it does not parse or is not such a document."""
    name = str(file)
    if text is None:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise ContractError(name, 1, f"cannot be read: {reason}") from None
    try:
        root = yaml.load(text, Loader=_LineLoader)  # a safe loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise ContractError(name, line, f"is not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ContractError(name, 1, f"is not valid YAML: {exc}") from None
    if not isinstance(root, YMap):
        raise ContractError(name, 1, "is not an OpenAPI document (not a mapping)")
    if "openapi" not in root:
        found = f"a Swagger {root['swagger']} document" if "swagger" in root else "no openapi field"
        line = root.line_of("swagger")
        raise ContractError(name, line, f"is not an OpenAPI 3.0 or 3.1 document ({found})")
    version = str(root["openapi"])
    if not _OPENAPI_VERSION.match(version):
        raise ContractError(name, root.line_of("openapi"),
                            f"is OpenAPI {version}; the review reads OpenAPI 3.0 and 3.1")
    paths = root.get("paths", {})
    if paths is not None and not isinstance(paths, dict):
        raise ContractError(name, root.line_of("paths"), "paths is not a mapping")
    return Document(name, root)
