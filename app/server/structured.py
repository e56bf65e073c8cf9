"""`response_format`: JSON output, as a grammar the engine applies to target and draft alike.

`{"type": "json_object"}` asks for any JSON object; `{"type": "json_schema", "json_schema":
{"name", "schema", "strict"}}` for a value matching the schema. The schema becomes a GBNF grammar
through llama-cpp-python's converter (`llama_cpp.llama_grammar.json_schema_to_gbnf`), and every
reply is held to it whatever `strict` says: a constraint is only worth having when it holds, so
a keyword the grammar would leave out is refused (app/server/schema_support.py).
"""

from __future__ import annotations

import json
import math
from typing import Any

from app.engine.constraint import Grammar
from app.server.errors import ApiError, finite_number, invalid
from app.server.schema_support import check_supported, rewrite_nodes
from app.server.string_patterns import JSON_STRING_CHAR, PatternError, json_patterns

# The converter leaves integer bounds out of its grammar; a bounded integer is written as the
# list of its values instead, for ranges up to this size (a longer list slows every mask).
MAX_INTEGER_RANGE = 256
_JSON_OBJECT: dict[str, Any] = {"type": "object"}


def response_constraint(fields: dict[str, Any]) -> Grammar | None:
    """The grammar `response_format` (or llama-server's `json_schema` or `grammar`) asks for,
    None for plain text, and whether the draft model is masked too:
    `speculative.constrain_draft`, on by default, off only to measure what it is worth."""
    given = [name for name in ("response_format", "json_schema", "grammar") if fields.get(name)]
    if len(given) > 1:
        raise invalid(given[1], f"'{given[0]}' and '{given[1]}' cannot be combined")
    draft = constrain_draft(fields)
    if given == ["json_schema"]:
        return Grammar(
            schema_grammar(_object_field(fields, "json_schema"), "json_schema"), draft=draft
        )
    if given == ["grammar"]:
        gbnf = fields["grammar"]
        if not isinstance(gbnf, str):
            raise invalid("grammar", "'grammar' must be a GBNF string", code="invalid_type")
        return Grammar(gbnf, draft=draft)
    value = fields.get("response_format")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid("response_format", "'response_format' must be an object", code="invalid_type")
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = _JSON_OBJECT
    elif kind == "json_schema":
        schema = _schema_of(value.get("json_schema"))
    else:
        message = "'response_format.type' must be 'text', 'json_object' or 'json_schema'"
        raise invalid("response_format.type", message)
    return Grammar(schema_grammar(schema), draft=draft)


def _object_field(fields: dict[str, Any], name: str) -> dict[str, Any]:
    value = fields[name]
    if not isinstance(value, dict):
        raise invalid(name, f"'{name}' must be an object", code="invalid_type")
    return value


def _schema_of(value: Any) -> dict[str, Any]:
    where = "response_format.json_schema"
    if not isinstance(value, dict):
        raise invalid(where, f"'{where}' must be an object", code="invalid_type")
    name = value.get("name")
    if name is not None and not isinstance(name, str):
        raise invalid(f"{where}.name", f"'{where}.name' must be a string", code="invalid_type")
    strict = value.get("strict")
    if strict is not None and not isinstance(strict, bool):
        message = f"'{where}.strict' must be true or false"
        raise invalid(f"{where}.strict", message, code="invalid_type")
    schema = value.get("schema", _JSON_OBJECT)
    if not isinstance(schema, dict):
        raise invalid(f"{where}.schema", f"'{where}.schema' must be an object", code="invalid_type")
    return schema


def constrain_draft(fields: dict[str, Any]) -> bool:
    value = fields.get("speculative")
    if not isinstance(value, dict) or value.get("constrain_draft") is None:
        return True
    flag = value["constrain_draft"]
    if not isinstance(flag, bool):
        message = "'speculative.constrain_draft' must be true or false"
        raise invalid("speculative.constrain_draft", message, code="invalid_type")
    return flag


def schema_grammar(
    schema: dict[str, Any], where: str = "response_format", *, loose_bounds: bool = False
) -> str:
    """GBNF for a JSON schema; a schema the converter cannot read is the client's 400.
    `loose_bounds`: numeric bounds the grammar cannot hold are left out rather than refused
    (functions that are not strict, app/server/tools.py)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # noqa: PLC0415 - native package

    try:
        bounded = json_patterns(_bounded(schema, where, loose_bounds))
    except PatternError as exc:
        raise invalid(where, f"'{where}': {exc}") from None
    check_supported(bounded, where)
    try:
        grammar: str = json_schema_to_gbnf(json.dumps(bounded))
    except ApiError:
        raise
    except Exception as exc:  # the converter raises bare Exceptions and KeyErrors alike
        raise invalid(where, f"'{where}' holds a schema this server cannot use: {exc}") from None
    return _json_string_chars(grammar)


# llama-cpp-python's converter lets a string hold any character but `"` and `\`, raw control
# characters included, which JSON forbids: a sampled reply with a newline inside a string is
# no JSON. llama.cpp's own converter (json-schema-to-grammar.cpp) leaves them out, as here.
_CONVERTER_STRING_CHAR = r'[^"\\]'


def _json_string_chars(grammar: str) -> str:
    return grammar.replace(_CONVERTER_STRING_CHAR, JSON_STRING_CHAR)


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _bounded(schema: Any, where: str, loose: bool) -> Any:
    """The schema with each bounded integer replaced by the list of its values. `loose`: a
    bound the grammar cannot hold (on a number, or an integer range too wide to list) is left
    out of it instead of refused."""

    def bound(path: str, node: dict[str, Any]) -> dict[str, Any]:
        if not any(key in node for key in _BOUNDS):
            return node
        if node.get("type") == "integer":
            held = _integer_range(node, where, loose, path)
            if held is not None:
                low, high = held
                for key in (*_BOUNDS, "type"):
                    node.pop(key, None)
                node["enum"] = list(range(low, high + 1))
                return node
        elif not loose:
            message = (
                f"'{where}': the bounds at {path} are not supported: minimum and maximum are "
                "supported on integers only"
            )
            raise invalid(where, message)
        for key in _BOUNDS:
            finite_number(node.pop(key, None), where, f"'{where}': '{key}' at {path}")
        return node

    return rewrite_nodes(schema, bound)


def _integer_range(
    schema: dict[str, Any], where: str, loose: bool, path: str
) -> tuple[int, int] | None:
    def bound(key: str) -> float | None:
        value = schema.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # exact: as a float, 2^53 + 1 reads as 2^53
        return finite_number(value, where, f"'{where}': '{key}' at {path}")

    lows = [math.ceil(v) for v in (bound("minimum"),) if v is not None]
    lows += [math.floor(v) + 1 for v in (bound("exclusiveMinimum"),) if v is not None]
    highs = [math.floor(v) for v in (bound("maximum"),) if v is not None]
    highs += [math.ceil(v) - 1 for v in (bound("exclusiveMaximum"),) if v is not None]
    low = max(lows) if lows else None
    high = min(highs) if highs else None
    if low is None or high is None or not 0 <= high - low < MAX_INTEGER_RANGE:
        if loose:
            return None
        message = (
            f"'{where}': the integer at {path} needs both bounds, at most "
            f"{MAX_INTEGER_RANGE} values apart"
        )
        raise invalid(where, message)
    return low, high
