"""Validating instances against a schema with the ``jsonschema`` library.

The front end uses it to decide finite value sets exactly (``enum``/``const`` next to any
other keyword, ``not`` and ``if`` included); the tests use it as ground truth. A schema
without ``$schema`` is read as draft 2020-12 that also understands the older spellings
still common in the wild: ``dependencies``, ``items`` as a list with ``additionalItems``,
and draft-4 boolean ``exclusiveMinimum``/``exclusiveMaximum``."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any


@cache
def _lenient_draft() -> Any:
    from jsonschema import Draft4Validator, Draft7Validator, Draft201909Validator
    from jsonschema import Draft202012Validator as Latest
    from jsonschema.validators import extend

    legacy_items = Draft201909Validator.VALIDATORS["items"]
    latest_items = Latest.VALIDATORS["items"]

    def items(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if isinstance(value, list) or "prefixItems" not in schema:
            return legacy_items(validator, value, instance, schema)
        return latest_items(validator, value, instance, schema)

    def bound(keyword: str, exclusive: str) -> Any:
        old, new = Draft4Validator.VALIDATORS[keyword], Latest.VALIDATORS[keyword]

        def check(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            if isinstance(schema.get(exclusive), bool):
                return old(validator, value, instance, schema)
            return new(validator, value, instance, schema)

        return check

    def exclusive(keyword: str) -> Any:
        new = Latest.VALIDATORS[keyword]

        def check(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            return iter(()) if isinstance(value, bool) else new(validator, value, instance, schema)

        return check

    return extend(
        Latest,
        {
            "dependencies": Draft7Validator.VALIDATORS["dependencies"],
            "items": items,
            "additionalItems": Draft201909Validator.VALIDATORS["additionalItems"],
            "minimum": bound("minimum", "exclusiveMinimum"),
            "maximum": bound("maximum", "exclusiveMaximum"),
            "exclusiveMinimum": exclusive("exclusiveMinimum"),
            "exclusiveMaximum": exclusive("exclusiveMaximum"),
        },
    )


def validator_for_root(root: Any) -> Any:
    """A ``jsonschema`` validator for ``root``: the draft its ``$schema`` names, otherwise
    the lenient latest draft described above. ``$ref`` resolves against ``root`` only:
    nothing is ever fetched."""
    from jsonschema.validators import validator_for
    from referencing import Registry

    cls = validator_for(root, default=_lenient_draft())
    return cls(root, registry=Registry())
