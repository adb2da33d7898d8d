"""Arguments for a tool call, synthesised from the tool's input JSON Schema.

`valid` builds a value that satisfies the schema by construction: types (and type lists), enum and
const, anyOf/oneOf/allOf, local $ref, string formats (date-time, date, time, email, uri, uuid, ipv4,
hostname), length, numeric bounds and multipleOf, array sizes and uniqueness, required and optional
properties. Strings come from a `suggest` callback first: values the episode has seen for what the
property is (so calls chain into each other), then plausible ones (real timezone names, say); a
few are made up, which is how agents end up calling with a value the server does not know.

`invalid` takes a valid object and breaks exactly one rule (drops a required property, gives a
property a wrong JSON type, steps out of an enum or a bound, adds a property where none may be
added), returning the arguments and what was broken; None when the schema forbids nothing.
"""

from __future__ import annotations

import math
import random
import re
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# (property name, its schema) -> (values seen in the episode, plausible values); either may be empty.
Suggest = Callable[[str, dict[str, Any]], tuple[list[str], list[str]]]

_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
# A value of each JSON type, used to give a property a type its schema does not allow.
_WRONG_VALUES: dict[str, Any] = {
    "string": "not-a-number",
    "integer": 42,
    "boolean": True,
    "array": ["x"],
    "object": {"unexpected": 1},
    "null": None,
}
_WORDS = (
    "alpha beta gamma delta notes report draft summary config readme todo ideas release budget "
    "meeting project sample test example data archive backup plan review"
).split()
_MAX_DEPTH = 6


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def schema_types(schema: dict[str, Any]) -> list[str]:
    """The JSON types a schema allows directly ("type", else inferred from its keywords)."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if t in _JSON_TYPES]
    if "properties" in schema or "required" in schema:
        return ["object"]
    if "items" in schema or "prefixItems" in schema:
        return ["array"]
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return ["number"]
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return ["string"]
    return []


def allowed_types(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """Every JSON type a value may have under `schema` (through $ref and anyOf/oneOf); empty = any."""
    schema = resolve(schema, root)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        found: set[str] = set()
        for branch in branches:
            types = allowed_types(branch, root)
            if not types:
                return set()
            found |= types
        return found
    types = set(schema_types(schema))
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        types = {_type_of(v) for v in values}
    if "number" in types:
        types.add("integer")  # an integer is a number
    return types


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    """`schema` with a local `$ref` ("#/$defs/X", "#/definitions/X") followed; {} when unresolvable."""
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < _MAX_DEPTH:
        node: Any = root
        for part in schema["$ref"].removeprefix("#").strip("/").split("/"):
            node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, dict) else {}
        schema, seen = node, seen + 1
    return schema if isinstance(schema, dict) else {}


def _merge_all_of(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """allOf folded into one schema: properties and required united, other keywords overlaid."""
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        part = resolve(part, root)
        for key, value in part.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required":
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


@dataclass
class Synthesizer:
    """Builds values for one tool's input schema; all randomness from `rng`."""

    rng: random.Random
    suggest: Suggest
    optional_probability: float = 0.45  # how often an optional property is given
    seen_probability: float = 0.7  # how often a fitting seen value is reused
    plausible_probability: float = 0.85  # else how often a plausible value is taken over a made-up one

    def valid(self, schema: dict[str, Any], root: dict[str, Any] | None = None, name: str = "") -> Any:
        """A value that satisfies `schema`; `root` holds its $defs (the tool's whole input schema)."""
        return self._value(schema, root if root is not None else schema, name, 0)

    def _value(self, schema: Any, root: dict[str, Any], name: str, depth: int) -> Any:
        schema = resolve(schema, root)
        if "allOf" in schema:
            schema = _merge_all_of(schema, root)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self._from_enum(schema, name)
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            return self._value(self._pick_branch(branches, root), root, name, depth)
        types = schema_types(schema) or ["string"]
        non_null = [t for t in types if t != "null"]
        kind = self.rng.choice(non_null) if non_null and self.rng.random() > 0.05 else types[0]
        if depth >= _MAX_DEPTH and kind in ("array", "object"):
            return [] if kind == "array" else {}
        if kind == "object":
            return self._object(schema, root, depth)
        if kind == "array":
            return self._array(schema, root, name, depth)
        if kind in ("integer", "number"):
            return self._number(schema, name, integer=kind == "integer")
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self._string(schema, name)

    def _from_enum(self, schema: dict[str, Any], name: str) -> Any:
        seen, _ = self.suggest(name, schema)
        fits = [value for value in seen if value in schema["enum"]]
        if fits and self.rng.random() < self.seen_probability:
            return self.rng.choice(fits)
        return self.rng.choice(schema["enum"])

    def _pick_branch(self, branches: list[Any], root: dict[str, Any]) -> dict[str, Any]:
        # `X | None` is the commonest union: give the real value far more often than null.
        resolved = [resolve(b, root) for b in branches]
        real = [b for b in resolved if schema_types(b) != ["null"]]
        if real and (len(real) == len(resolved) or self.rng.random() < 0.85):
            return self.rng.choice(real)
        return self.rng.choice(resolved)

    def _object(self, schema: dict[str, Any], root: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        value: dict[str, Any] = {}
        for key, sub in properties.items():
            if key in required or self.rng.random() < self.optional_probability:
                value[key] = self._value(sub, root, key, depth + 1)
        for key in sorted(required - set(properties)):  # required but undescribed: any value will do
            value[key] = self._string({}, key)
        return value

    def _array(self, schema: dict[str, Any], root: dict[str, Any], name: str, depth: int) -> list[Any]:
        low = int(schema.get("minItems", 0))
        high = int(schema.get("maxItems", low + 3))
        prefix = schema.get("prefixItems") or []
        count = min(high, max(len(prefix), self.rng.randint(min(max(low, 1), high), high)))
        singular = name[:-1] if name.endswith("s") else name  # "paths" holds path-like strings
        items: list[Any] = []
        for _ in range(count * 8):  # uniqueItems: a few tries for each value not taken yet
            if len(items) == count:
                break
            item_schema = prefix[len(items)] if len(items) < len(prefix) else schema.get("items", {})
            item = self._value(item_schema, root, singular, depth + 1)
            if not schema.get("uniqueItems") or item not in items:
                items.append(item)
        return items

    def _number(self, schema: dict[str, Any], name: str, integer: bool) -> int | float:
        if "default" in schema and isinstance(schema["default"], int | float) and self.rng.random() < 0.2:
            return schema["default"]
        low, high = _bounds(schema, integer)
        if self.rng.random() < 0.7:  # agents ask for small counts and sizes far more often than huge ones
            high = min(high, low + 50)
        step = schema.get("multipleOf")
        if isinstance(step, int | float) and step > 0:
            first, last = math.ceil(low / step), math.floor(high / step)
            multiple = self.rng.randint(first, max(first, min(last, first + 20))) * step
            return int(multiple) if integer or float(multiple).is_integer() else multiple
        if integer or self.rng.random() < 0.8 and math.ceil(low) <= math.floor(high):
            return self.rng.randint(math.ceil(low), math.floor(high))
        return round(self.rng.uniform(low, high), 2)

    def _string(self, schema: dict[str, Any], name: str) -> str:
        seen, plausible = self.suggest(name, schema)
        fits = [s for s in seen if _string_fits(s, schema)]
        if fits and self.rng.random() < self.seen_probability:
            return self.rng.choice(fits)
        likely = [s for s in plausible if _string_fits(s, schema)]
        if likely and self.rng.random() < self.plausible_probability:
            return self.rng.choice(likely)
        fits += likely
        fresh = _formatted(schema.get("format"), self.rng)
        if fresh is None:
            fresh = _words(self.rng, self.rng.randint(1, 2)).replace(" ", "-" if "name" in name else " ")
        low, high = int(schema.get("minLength", 0)), int(schema.get("maxLength", 10**6))
        word = self.rng.choice(_WORDS)
        # Simpler shapes for a pattern the first guess misses: one word, letters and digits, digits.
        for candidate in (fresh, word, f"{word}{self.rng.randint(1, 99)}", str(self.rng.randint(0, 10**6))):
            candidate = (candidate + "x" * low)[: max(low, len(candidate))][:high]
            if _string_fits(candidate, schema):
                return candidate
        return fits[0] if fits else fresh  # a pattern we cannot satisfy: the server will say so


def _bounds(schema: dict[str, Any], integer: bool) -> tuple[float, float]:
    """(low, high) inclusive, from minimum/maximum and both forms of the exclusive bounds."""
    low = float(schema.get("minimum", -10 if "maximum" in schema else 0))
    high = float(schema.get("maximum", max(low, 0) + 20))
    nudge = 1 if integer else 0.01
    exclusive_low, exclusive_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if exclusive_low is True:  # draft 4: a flag on minimum
        low += nudge
    elif isinstance(exclusive_low, int | float) and not isinstance(exclusive_low, bool):
        low = max(low, exclusive_low + nudge)
    if exclusive_high is True:
        high -= nudge
    elif isinstance(exclusive_high, int | float) and not isinstance(exclusive_high, bool):
        high = min(high, exclusive_high - nudge)
    if integer:
        low, high = float(math.ceil(low)), float(math.floor(high))
    return low, max(low, high)


def _string_fits(value: str, schema: dict[str, Any]) -> bool:
    if not isinstance(value, str):
        return False
    if len(value) < int(schema.get("minLength", 0)) or len(value) > int(schema.get("maxLength", 10**6)):
        return False
    pattern = schema.get("pattern")
    try:
        return not isinstance(pattern, str) or re.search(pattern, value) is not None
    except re.error:
        return True


def _formatted(fmt: Any, rng: random.Random) -> str | None:
    day = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    clock = f"{rng.randint(0, 23):02d}:{rng.choice((0, 15, 30, 45)):02d}:00"
    host = rng.choice(("example.com", "example.org", "docs.example.net"))
    forms = {
        "date-time": f"{day}T{clock}Z",
        "date": day,
        "time": f"{clock}Z",
        "email": f"{rng.choice(_WORDS)}@{host}",
        "uri": f"https://{host}/{rng.choice(_WORDS)}",
        "url": f"https://{host}/{rng.choice(_WORDS)}",
        "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "ipv4": f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        "hostname": host,
    }
    return forms.get(fmt) if isinstance(fmt, str) else None


# -- deliberately invalid arguments -----------------------------------------------------------------


def invalid(
    schema: dict[str, Any], arguments: dict[str, Any], rng: random.Random
) -> tuple[dict[str, Any], str] | None:
    """`arguments` (valid for the object `schema`) with one rule broken, and which; None if none can be."""
    root = schema
    properties = schema.get("properties") or {}
    required = [k for k in schema.get("required") or [] if k in arguments]
    moves: list[Callable[[], tuple[dict[str, Any], str] | None]] = []
    if required:
        moves.append(lambda: _drop(arguments, rng.choice(required)))
    typed = [k for k, sub in properties.items() if allowed_types(sub, root)]
    if typed:
        moves.append(lambda: _wrong_type(arguments, properties, root, rng.choice(typed), rng))
    bounded = [k for k, sub in properties.items() if _out_of_bounds(resolve(sub, root)) is not None]
    if bounded:
        moves.append(lambda: _out_of_range(arguments, properties, root, rng.choice(bounded)))
    if schema.get("additionalProperties") is False:
        moves.append(lambda: ({**arguments, _unknown_key(properties, rng): "x"}, "unknown property"))
    rng.shuffle(moves)
    for move in moves:
        broken = move()
        if broken is not None:
            return broken
    return None


def _drop(arguments: dict[str, Any], key: str) -> tuple[dict[str, Any], str]:
    return {k: v for k, v in arguments.items() if k != key}, f"missing required {key!r}"


def _wrong_type(
    arguments: dict[str, Any], properties: dict[str, Any], root: dict[str, Any], key: str, rng: random.Random
) -> tuple[dict[str, Any], str] | None:
    allowed = allowed_types(properties[key], root)
    wrong = [t for t in _WRONG_VALUES if t not in allowed]
    if not wrong:
        return None
    kind = rng.choice(wrong)
    return {**arguments, key: _WRONG_VALUES[kind]}, f"{key!r} given a {kind}"


def _out_of_bounds(schema: dict[str, Any]) -> Any:
    """A value of the right type that breaks an enum, a bound or a minimum length; None if none."""
    if isinstance(schema.get("enum"), list) and all(isinstance(v, str) for v in schema["enum"]):
        return "-".join(str(v) for v in schema["enum"][:2]) + "-other"
    if isinstance(schema.get("minimum"), int | float) and not isinstance(schema["minimum"], bool):
        return schema["minimum"] - 1
    if isinstance(schema.get("maximum"), int | float) and not isinstance(schema["maximum"], bool):
        return schema["maximum"] + 1
    if isinstance(schema.get("minItems"), int) and schema["minItems"] > 0:
        return []
    if isinstance(schema.get("minLength"), int) and schema["minLength"] > 0:
        return ""
    return None


def _out_of_range(
    arguments: dict[str, Any], properties: dict[str, Any], root: dict[str, Any], key: str
) -> tuple[dict[str, Any], str]:
    value = _out_of_bounds(resolve(properties[key], root))
    return {**arguments, key: value}, f"{key!r} out of range: {value!r}"


def _unknown_key(properties: dict[str, Any], rng: random.Random) -> str:
    while True:
        key = "".join(rng.choice(string.ascii_lowercase) for _ in range(6))
        if key not in properties:
            return key
