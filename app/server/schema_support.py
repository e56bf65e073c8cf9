"""Which JSON-schema keywords the grammar can hold, node by node, so none is dropped in silence.

llama-cpp-python's converter (`llama_cpp.llama_grammar.json_schema_to_gbnf`, a port of
llama.cpp's json_schema_to_grammar.py) reads each schema node down one branch of an if/elif
chain: a `$ref`, a union, a `const` or `enum`, an object with properties, an `allOf`, an array
with items, a string with a pattern, a format or a length, else the bare type. Whatever else the
node says is left out of the grammar, so a reply can break it (`multipleOf`, `uniqueItems`,
`maxProperties`, `propertyNames`, `contains`, a `maxLength` beside a `pattern`, ...) while the
server answers 200. `check_supported` follows the same branches and refuses, with a 400 naming
the keyword and where it stands, every assertion the chosen branch would not read.

Annotations (`title`, `description`, `default`, `examples`, ...) and keywords JSON Schema does not
define are ignored by validators too, and pass. So does `format` outside the formats the
converter knows (`date`, `time`, `date-time`, `uuid`): in JSON Schema 2020-12 it is an annotation
unless a validator is told to assert it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

from app.server.errors import invalid

# Keywords that constrain a value under JSON Schema 2020-12 (and draft 7's additionalItems and
# dependencies); a validator checks them, so the grammar must hold them or refuse them.
ASSERTIONS = frozenset(
    {
        "$ref", "$dynamicRef", "type", "enum", "const",
        "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "maxLength", "minLength", "pattern", "format",
        "items", "prefixItems", "additionalItems", "unevaluatedItems",
        "maxItems", "minItems", "uniqueItems", "contains", "maxContains", "minContains",
        "properties", "patternProperties", "additionalProperties", "unevaluatedProperties",
        "propertyNames", "maxProperties", "minProperties", "required",
        "dependentRequired", "dependentSchemas", "dependencies",
        "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    }
)  # fmt: skip
# The converter's own string formats (STRING_FORMAT_RULES and its uuid rule).
GRAMMAR_FORMATS = frozenset({"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3",
                             "uuid4", "uuid5"})  # fmt: skip
_DEFINITIONS = ("$defs", "definitions")
# What an allOf member may say for the converter to merge all of it.
_MERGED = frozenset({"type", "properties", "required", "additionalProperties", "$ref", "anyOf"})


def check_supported(schema: Any, where: str) -> None:
    """ApiError (400) for the first assertion in `schema` the grammar would leave out."""
    for path, node in _nodes(schema, "#"):
        honoured = _honoured(node)
        dropped = sorted((set(node) & ASSERTIONS) - honoured)
        if not dropped and "allOf" in honoured:
            dropped = [f"allOf/{i}" for i, part in enumerate(node["allOf"]) if not _merged(part)]
        if dropped:
            keyword = dropped[0]
            message = (
                f"'{where}': '{keyword}' at {path} is not supported: the grammar cannot hold "
                "it beside the rest of that schema, so a reply could break it; leave it out"
            )
            raise invalid(where, message, code="unsupported_schema")


def _honoured(node: dict[str, Any]) -> set[str]:
    """The keywords the converter reads from this node, in its order of branches."""
    kind = node.get("type")
    if "$ref" in node:
        return {"$ref"}
    if "oneOf" in node or "anyOf" in node:
        return {"oneOf"} if node.get("oneOf") else {"anyOf"}
    if isinstance(kind, list):
        return {"type"}
    if "const" in node:
        return {"const", "type"}
    if "enum" in node:
        return {"enum", "type"}
    if kind in (None, "object") and (
        "properties" in node or node.get("additionalProperties", True) is not True
    ):
        return {"type", "properties", "required", "additionalProperties"}
    if kind in (None, "object") and "allOf" in node:
        # Components' properties are merged, all required, and nothing else admitted: stricter
        # than the schema wherever it differs, so the reply still matches it.
        return {"type", "allOf", "required", "additionalProperties"}
    if kind in (None, "array") and ("items" in node or "prefixItems" in node):
        items = node.get("items") or node.get("prefixItems")
        if isinstance(items, list):
            return {"type", "items", "prefixItems"} | _tuple_bounds(node, len(items))
        return {"type", "items", "minItems", "maxItems"} | (
            set() if node.get("items") else {"prefixItems"}
        )
    if kind in (None, "string") and "pattern" in node:
        return {"type", "pattern", "format"}
    if kind in (None, "string") and node.get("format") in GRAMMAR_FORMATS:
        return {"type", "format"}
    if kind == "string" and ("minLength" in node or "maxLength" in node):
        return {"type", "minLength", "maxLength", "format"}
    return {"type", "format"}


def _merged(part: Any) -> bool:
    """Whether the converter merges this allOf member whole: it reads only an object's
    properties (through a `$ref`, or from each member of an `anyOf`)."""
    if not isinstance(part, dict) or part.get("type") not in (None, "object"):
        return False
    if not set(part) & ASSERTIONS <= _MERGED:
        return False
    alternatives = part.get("anyOf", [])
    return isinstance(alternatives, list) and all(
        isinstance(alt, dict) and set(alt) & ASSERTIONS <= _MERGED - {"anyOf"}
        for alt in alternatives
    )


def _tuple_bounds(node: dict[str, Any], length: int) -> set[str]:
    """A tuple's item count is its length: minItems and maxItems pass when that meets them."""
    low, high = node.get("minItems", 0), node.get("maxItems", length)
    fits = isinstance(low, int) and isinstance(high, int) and low <= length <= high
    return {"minItems", "maxItems"} if fits else set()


# Where a schema holds other schemas: keywords whose value is one, a list of them, or a map of
# names to them. `enum`, `const`, `default` and `examples` hold data; any other key may hold a
# schema a `$ref` points at (OpenAPI's `components`), so it is searched for those.
_SCHEMA_VALUED = frozenset({
    "items", "additionalProperties", "additionalItems", "contains", "not", "if", "then", "else",
    "propertyNames", "unevaluatedItems", "unevaluatedProperties",
})  # fmt: skip
_SCHEMA_LISTS = frozenset({"items", "prefixItems", "anyOf", "oneOf", "allOf"})
_SCHEMA_MAPS = frozenset({*_DEFINITIONS, "properties", "patternProperties", "dependentSchemas"})
_DATA = frozenset({"enum", "const", "default", "examples"})

# What a place in the schema holds: a schema, a map of names to schemas, a list of schemas,
# data (left as it is), or something else, searched only for places a `$ref` points at.
_Kind = Literal["schema", "map", "list", "data", "other"]
NodeRewrite = Callable[[str, dict[str, Any]], dict[str, Any]]


def rewrite_nodes(schema: Any, rewrite: NodeRewrite) -> Any:
    """A copy of the schema with rewrite(pointer, node) applied to every schema node, inner ones
    first; data (an `enum` of objects, a `const`) and property names are left alone."""
    refs = _local_refs(schema)

    def walk(value: Any, path: str, kind: _Kind) -> Any:
        if kind == "data":
            return value
        if isinstance(value, dict):
            out = {
                key: walk(child, child_path, child_kind)
                for key, child, child_path, child_kind in _children(value, path, kind, refs)
            }
            return rewrite(path, out) if kind == "schema" else out
        if isinstance(value, list):
            return [walk(child, p, k) for _, child, p, k in _children(value, path, kind, refs)]
        return value

    return walk(schema, "#", "schema")


def _nodes(schema: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node the converter may visit, with its JSON pointer, outer ones first."""
    refs = _local_refs(schema)
    pending: list[tuple[Any, str, _Kind]] = [(schema, path, "schema")]
    while pending:
        value, where, kind = pending.pop()
        if kind == "schema" and isinstance(value, dict):
            yield where, value
        if kind != "data" and isinstance(value, dict | list):
            children = _children(value, where, kind, refs)
            pending.extend((child, p, k) for _, child, p, k in reversed(list(children)))


def _children(
    value: dict[str, Any] | list[Any], path: str, kind: _Kind, refs: frozenset[str]
) -> Iterator[tuple[Any, Any, str, _Kind]]:
    """(key or index, child, its pointer, what it holds) for every child."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        where = f"{path}/{_pointer_part(str(key))}"
        yield key, child, where, _child_kind(kind, key, child, where, refs)


def _child_kind(kind: _Kind, key: Any, child: Any, where: str, refs: frozenset[str]) -> _Kind:
    if kind == "map" or (kind == "list" and isinstance(key, int)):
        return "schema"
    if kind == "schema" and key in _DATA:
        return "data"
    if kind == "schema" and key in _SCHEMA_MAPS and isinstance(child, dict):
        return "map"
    if kind == "schema" and key in _SCHEMA_LISTS and isinstance(child, list):
        return "list"
    if kind == "schema" and key in _SCHEMA_VALUED:
        return "schema"
    return "schema" if where in refs else "other"


def _pointer_part(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _local_refs(schema: Any) -> frozenset[str]:
    """Every `$ref` within the document (`#/...`), wherever it stands."""
    found: set[str] = set()
    pending = [schema]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                found.add(ref)
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return frozenset(found)
