"""Twelve JSON schemas for structured output, each with a prompt that asks for it.

Between them they hold nested objects, arrays (of strings, numbers and objects, and at the top
level), enums, required and optional fields, integers with minimum and maximum, and string
patterns. Strings carry a maxLength or a bounded pattern so that a small model's reply ends
within a test's token budget (the unanchored pattern's reply ends on the demo target too).
"""

from __future__ import annotations

from typing import Any

_NAME = {"type": "string", "minLength": 1, "maxLength": 16}

SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "person": (
        "Describe a person with a name and an age.",
        {
            "type": "object",
            "properties": {"name": _NAME, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
            "required": ["name", "age"],
        },
    ),
    "colour-enum": (
        "What colour is the sky?",
        {
            "type": "object",
            "properties": {"colour": {"enum": ["red", "green", "blue", "grey"]}},
            "required": ["colour"],
        },
    ),
    "string-list": (
        "List some fruits.",
        {
            "type": "object",
            "properties": {
                "fruits": {"type": "array", "items": _NAME, "minItems": 1, "maxItems": 3}
            },
            "required": ["fruits"],
        },
    ),
    "nested-user": (
        "Make up a user account.",
        {
            "type": "object",
            "properties": {
                "user": {
                    "type": "object",
                    "properties": {
                        "name": _NAME,
                        "email": {"type": "string", "maxLength": 24},
                        "admin": {"type": "boolean"},
                    },
                    "required": ["name", "admin"],
                }
            },
            "required": ["user"],
        },
    ),
    "yes-no": (
        "Is water wet? Answer and say how sure you are from 1 to 10.",
        {
            "type": "object",
            "properties": {
                "answer": {"type": "boolean"},
                "confidence": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["answer", "confidence"],
        },
    ),
    "planets": (
        "Name planets and how many moons each has.",
        {
            "type": "object",
            "properties": {
                "planets": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": _NAME,
                            "moons": {"type": "integer", "minimum": 0, "maximum": 99},
                        },
                        "required": ["name", "moons"],
                    },
                    "minItems": 1,
                    "maxItems": 3,
                }
            },
            "required": ["planets"],
        },
    ),
    "price": (
        "How much does a coffee cost?",
        {
            "type": "object",
            "properties": {"price": {"type": "number"}, "currency": {"enum": ["USD", "EUR"]}},
            "required": ["price", "currency"],
        },
    ),
    "digits": (
        "Give me a few single digits.",
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 9},
            "minItems": 2,
            "maxItems": 4,
        },
    ),
    "status": (
        "Report the status of a web request.",
        {
            "type": "object",
            "properties": {
                "status": {"enum": ["ok", "error"]},
                "code": {"type": "integer", "minimum": 200, "maximum": 204},
                "note": {"type": "string", "maxLength": 20},
            },
            "required": ["status", "code"],
        },
    ),
    "settings": (
        "Write the settings of a program.",
        {
            "type": "object",
            "properties": {
                "config": {
                    "type": "object",
                    "properties": {
                        "debug": {"type": "boolean"},
                        "level": {"enum": ["low", "medium", "high"]},
                        "tags": {
                            "type": "array",
                            "items": {"enum": ["a", "b", "c"]},
                            "maxItems": 3,
                        },
                    },
                    "required": ["debug", "level", "tags"],
                }
            },
            "required": ["config"],
        },
    ),
    # JSON Schema matches a pattern anywhere in the string (Pydantic writes them so).
    "airport-code": (
        "What is the IATA code of the main airport of Paris?",
        {
            "type": "object",
            "properties": {"airport": {"type": "string", "pattern": "[A-Z]{3}"}},
            "required": ["airport"],
        },
    ),
    # Printable ASCII takes in `"` and `\`, which a JSON string may only hold escaped.
    "printable-quote": (
        "Write a short quote by a famous person.",
        {
            "type": "object",
            "properties": {"quote": {"type": "string", "pattern": "^[ -~]{1,40}$"}},
            "required": ["quote"],
        },
    ),
}
