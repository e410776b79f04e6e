"""Names and texts for instructions: fresh variable names and summaries of functions."""

from __future__ import annotations

import random
import re

MAX_NAMED_TEXT = 80

_VERBS = frozenset(
    """
    abort accept acquire activate add allocate append apply assign attach bind build cache call
    cancel check clean clear close collect commit compare compile complete compute configure
    connect convert copy count create decode define delete describe destroy detach diff disable
    dispatch display dispose draw dump emit enable encode ensure escape evaluate exec execute
    expand explain export extend extract fetch fill filter find finish fix flush format gather generate
    get group handle hash import init insert install invoke join list load lock log lookup make
    map mark match measure merge migrate mount move normalize notify open pack parse patch pick
    pop prepare print process publish pull push put query read rebuild refresh register reject
    release reload remove rename render replace report request reset resize resolve restore
    retry run sample save scale scan schedule search select send serialize set setup show sign
    sort split start stop store strip subscribe swap sync toggle track transform translate trim
    unlock unpack unregister update upload validate verify view visit wait walk warn watch wrap
    write
    """.split()  # noqa: SIM905 - a word list reads best as text
)
_PREDICATES = frozenset({"is", "has", "can", "should"})
_PREPOSITIONS = frozenset({"as", "by", "for", "from", "in", "of", "on", "to", "with"})
_SYNONYMS = {
    "total": ("subtotal", "running_total"),
    "result": ("output", "outcome"),
    "results": ("outputs", "collected"),
    "count": ("counter", "tally"),
    "data": ("payload", "raw_data"),
    "items": ("entries", "elements"),
    "item": ("entry", "element"),
    "value": ("val", "current_value"),
    "values": ("vals", "numbers"),
    "name": ("label", "title"),
    "line": ("row", "text_line"),
    "lines": ("rows", "text_lines"),
    "key": ("k", "lookup_key"),
    "i": ("index", "idx"),
    "j": ("inner_index", "col"),
    "n": ("size", "length"),
    "x": ("value", "element"),
    "tmp": ("temp", "scratch"),
    "res": ("result", "answer"),
    "path": ("file_path", "location"),
    "text": ("content", "source"),
    "out": ("output", "buffer"),
    "acc": ("accumulator", "running"),
}
_NAME_PATTERNS = ("new_{}", "{}_value", "current_{}", "local_{}")


def new_name(old: str, python: bool, taken: str, rng: random.Random) -> str | None:
    """A fresh name for ``old`` that occurs nowhere in ``taken`` (snake_case for Python,
    camelCase for JavaScript; capitalised when ``old`` is)."""
    options = [*_SYNONYMS.get(old.lower(), ()), *(p.format(old) for p in _NAME_PATTERNS)]
    if not python:
        options = [_camel(option) for option in options]
    if old[:1].isupper():
        options = [option[:1].upper() + option[1:] for option in options]
    fresh = [
        option
        for option in options
        if option != old and not re.search(rf"(?<![\w$]){re.escape(option)}(?![\w$])", taken)
    ]
    return rng.choice(fresh) if fresh else None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name.strip("_$#"))
    return [word.lower() for word in re.split(r"[\s_]+", spaced) if word]


def dunder(name: str) -> bool:
    """Whether ``name`` is a special name such as ``__init__``."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def summary(qualified: str) -> str | None:
    """A one-sentence description of a function from its name (``load_config`` → ``Load
    config.``, ``is_empty`` → ``Return whether empty.``, ``mean`` → ``Return the mean.``);
    ``None`` for special methods and names too bare to describe (``add``, ``run``)."""
    name = qualified.rsplit(".", 1)[-1]
    words = _words(name)
    if dunder(name) or name == "constructor" or not words:
        return None
    first, rest = words[0], " ".join(words[1:])
    if first in _VERBS or first in _PREDICATES or first in _PREPOSITIONS:
        if not rest:
            return None
        if first in _PREDICATES:
            sentence = f"return whether {rest}"
        elif first in _PREPOSITIONS:
            sentence = f"return the value {first} {rest}"
        else:
            sentence = f"{first} {rest}"
    else:
        sentence = "return the " + " ".join(words)
    return sentence[0].upper() + sentence[1:] + "."
