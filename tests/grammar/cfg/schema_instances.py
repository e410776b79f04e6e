"""JSON Schema test data: fixture loading and compact serialisation in schema key order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parents[2] / "fixtures" / "jsonschema"


def fixture_schemas() -> list[tuple[str, dict[str, Any]]]:
    """(name, MaskBench record) for every schema copied into tests/fixtures/jsonschema."""
    return [(path.stem, json.loads(path.read_text())) for path in sorted(FIXTURES.glob("*.json"))]


def in_schema_order(value: Any, schema: Any, root: Any) -> Any:
    """``value`` with object keys in the order the schema declares them (declared first,
    others after), following properties, items, additionalProperties and local $ref."""
    while isinstance(schema, dict) and "$ref" in schema and schema["$ref"].startswith("#"):
        target = root
        for part in schema["$ref"][2:].split("/") if schema["$ref"] != "#" else []:
            target = target[part]
        schema = target
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        declared = schema.get("properties", {})
        extra = schema.get("additionalProperties", {})
        ordered = {k: in_schema_order(value[k], declared[k], root) for k in declared if k in value}
        for key, item in value.items():
            if key not in declared:
                ordered[key] = in_schema_order(item, extra, root)
        return ordered
    if isinstance(value, list):
        return [in_schema_order(item, schema.get("items", {}), root) for item in value]
    return value


def compact(value: Any) -> bytes:
    """Compact JSON text as the grammar expects it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
