"""Synthetic edit families on small Python and JavaScript modules, and ``cad data synth``."""

from __future__ import annotations

import ast
import random
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cad.resolver import oracle, resolve
from cad.server.cli import app, main
from cad.training import DatasetError, load_jsonl
from cad.training.synthetic import (
    FAMILIES,
    SyntheticEdit,
    edit_file,
    generate,
    parse_unit,
    synthesize,
)

INVENTORY_PY = '''\
"""Stock keeping for a small shop."""

import json

LOW_STOCK = 3


def restock(items, amount, note=None):
    total = 0
    for item in items:
        item.count += amount
        total += amount
    print("restocked", total)
    return total


class Inventory:
    """Items by name."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items = {}

    def load(self, strict: bool = False) -> dict:
        with open(self.path, encoding="utf-8") as handle:
            data = json.load(handle)
        self.items = {name: count for name, count in data.items()}
        return self.items

    def low_stock(self, limit=LOW_STOCK):
        names = [name for name, count in self.items.items() if count < limit]
        names.sort()
        return names
'''

CART_JS = """\
// Shopping cart helpers.
const TAX_RATE = 0.2;

function subtotal(items, currency) {
  let total = 0;
  for (const item of items) {
    total += item.price * item.quantity;
  }
  console.log("subtotal", total);
  return total;
}

export function withTax(amount) {
  const tax = amount * TAX_RATE;
  return amount + tax;
}

class Cart {
  constructor(owner) {
    this.owner = owner;
    this.items = [];
  }

  addItem(item, note) {
    this.items.push(item);
    return this.items.length;
  }
}

const describeCart = (cart) => {
  const count = cart.items.length;
  return `${cart.owner}: ${count} items`;
};

module.exports = { Cart, describeCart, subtotal, withTax };
"""

LANGUAGES = {"python": (INVENTORY_PY, "inventory.py"), "javascript": (CART_JS, "cart.js")}
SCOPE = r"`(?P<scope>[\w.]+)`"
INSTRUCTIONS = {
    "rename-local": rf"Rename the local variable `(?P<old>\w+)` to `(?P<new>\w+)` in {SCOPE}\.",
    "add-parameter": rf"Add a parameter `(?P<new>[^`]+)` to {SCOPE}\.",
    "remove-parameter": rf"Remove the unused parameter `(?P<old>\w+)` from {SCOPE}\.",
    "add-docstring": rf'Add the (docstring|JSDoc comment) "(?P<new>[^"]+)" to {SCOPE}\.',
    "change-constant": (
        rf"Change the constant `(?P<old>[^`]+)` to `(?P<new>[^`]+)` (in {SCOPE}|at the top level)\."
    ),
    "delete-statement": (
        r"Delete the (top-level statement `(?P<old>[^`]+)`|"
        rf"statement `(?P<old2>[^`]+)` from {SCOPE})\."
    ),
    "wrap-try": (
        rf"Wrap `(?P<old>[^`]+)` in {SCOPE} in a "
        r"(try/except that ignores `\w+`|try/catch that logs the error with `console\.error`)\."
    ),
}


def edits_of(text: str, language: str, family: str, seed: int = 0) -> list[SyntheticEdit]:
    """Every valid edit ``family`` makes in ``text`` (a large per-file budget)."""
    return edit_file(
        text, language, per_file=1000, rng=random.Random(seed), families=[FAMILIES[family]]
    )


def only(edits: list[SyntheticEdit], pattern: str) -> tuple[re.Match[str], str]:
    """The one edit whose instruction matches ``pattern``: its match and its ``after``."""
    found = [
        (m, e.example.after) for e in edits if (m := re.fullmatch(pattern, e.example.instruction))
    ]
    assert len(found) == 1, [e.example.instruction for e in edits]
    return found[0]


def clean(text: str, language: str) -> bool:
    """No tree-sitter error, and Python compiles (``ast.parse`` raises otherwise)."""
    if parse_unit(text, language).tree.root_node.has_error:
        return False
    if language == "python":
        ast.parse(text)
    return True


def test_family_registry_has_the_seven_families() -> None:
    assert list(FAMILIES) == [
        "rename-local",
        "add-parameter",
        "remove-parameter",
        "add-docstring",
        "change-constant",
        "delete-statement",
        "wrap-try",
    ]
    for name, family in FAMILIES.items():
        assert re.fullmatch(INSTRUCTIONS[name], family.example), name


def occurrences(text: str, part: str) -> int:
    """How often ``part`` occurs in ``text``; a name counts only as a whole word."""
    if re.fullmatch(r"\w+", part):
        return len(re.findall(rf"(?<![\w$]){part}(?![\w$])", text))
    return text.count(part)


def defines(text: str, scope: str) -> bool:
    """Whether every part of a qualified name (``Cart.addItem``) is defined in ``text``."""
    return all(
        re.search(rf"(def|class|function)\s+{part}\b|^\s*{part}\s*\(|\b{part}\s*=", text, re.M)
        for part in scope.split(".")
    )


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("language", list(LANGUAGES))
def test_every_edit_parses_differs_names_its_target_and_round_trips(
    family: str, language: str
) -> None:
    text, _ = LANGUAGES[language]
    edits = edits_of(text, language, family)
    assert edits, f"{family} made no edit of the {language} module"
    for edit in edits:
        example = edit.example
        before, after = example.before, example.after
        assert edit.family == family
        assert before == text
        assert after != before
        assert clean(after, language), example.instruction
        match = re.fullmatch(INSTRUCTIONS[family], example.instruction)
        assert match, example.instruction
        if match["scope"]:
            assert defines(before, match["scope"]), example.instruction
        old = match.groupdict().get("old") or match.groupdict().get("old2")
        new = match.groupdict().get("new")
        if old is not None and family != "wrap-try":
            assert occurrences(after, old) < occurrences(before, old), example.instruction
        if new is not None:
            assert occurrences(after, new) > occurrences(before, new), example.instruction
        if family == "wrap-try":
            assert after.count("try") == before.count("try") + 1 and old.split(" ...")[0] in after
        assert resolve(oracle(before, after), before) == after
    assert len({edit.example.id for edit in edits}) == len(edits)


def test_rename_local_renames_uses_but_not_attributes_or_keywords() -> None:
    before = (
        "def summary(stats):\n"
        "    total = stats.total\n"
        "    log(total=total)\n"
        "    return total\n"
        "\n"
        "\n"
        "def ranked(rows):\n"
        "    total = len(rows)\n"
        "    order = sorted(rows, key=lambda total: -total)\n"
        "    return order[:total]\n"
        "\n"
        "\n"
        "def gather(*parts):\n"
        "    parts = list(parts)\n"
        "    return parts\n"
    )
    edits = edits_of(before, "python", "rename-local")
    match, after = only(edits, r"Rename the local variable `total` to `(\w+)` in `summary`\.")
    new = match[1]
    assert after == before.replace(
        "    total = stats.total\n    log(total=total)\n    return total\n",
        f"    {new} = stats.total\n    log(total={new})\n    return {new}\n",
    )
    renamed = {
        re.search(r"`(\w+)` to .* in `(\w+)`", e.example.instruction).groups() for e in edits
    }
    assert ("total", "ranked") not in renamed
    assert ("order", "ranked") in renamed
    assert not any(scope == "gather" for _, scope in renamed)


def test_rename_local_in_javascript_skips_object_shorthands() -> None:
    before = (
        "function sum(items) {\n"
        "  let total = 0;\n"
        "  for (const item of items) {\n"
        "    total += item.total;\n"
        "  }\n"
        "  return total;\n"
        "}\n"
        "\n"
        "function pack(items) {\n"
        "  const total = items.length;\n"
        "  return { total, items };\n"
        "}\n"
    )
    edits = edits_of(before, "javascript", "rename-local")
    match, after = only(edits, r"Rename the local variable `total` to `(\w+)` in `sum`\.")
    new = match[1]
    assert re.fullmatch(r"[a-z]+[A-Za-z]*", new)
    assert after == before.replace("  let total = 0;", f"  let {new} = 0;").replace(
        "    total += item.total;\n  }\n  return total;",
        f"    {new} += item.total;\n  }}\n  return {new};",
    )
    assert not any("in `pack`" in e.example.instruction for e in edits)


def test_add_parameter_goes_last_but_before_keyword_splats() -> None:
    before = (
        "def load(path):\n"
        "    return open(path).read()\n"
        "\n"
        "\n"
        "def call(fn, *args, **kwargs):\n"
        "    return fn(*args, **kwargs)\n"
    )
    edits = edits_of(before, "python", "add-parameter")
    match, after = only(edits, r"Add a parameter `(\w+=[^`]+)` to `load`\.")
    assert after == before.replace("def load(path):", f"def load(path, {match[1]}):")
    match, after = only(edits, r"Add a parameter `([^`]+)` to `call`\.")
    assert after == before.replace("*args, **kwargs):", f"*args, {match[1]}, **kwargs):")


def test_add_parameter_is_typed_in_typed_functions_and_wraps_bare_arrow_parameters() -> None:
    typed = "def scale(value: float) -> float:\n    return value * 2\n"
    match, after = only(
        edits_of(typed, "python", "add-parameter"), r"Add a parameter `(.+)` to `scale`\."
    )
    assert re.fullmatch(r"\w+: [\w |]+ = .+", match[1])
    assert after == typed.replace("value: float)", f"value: float, {match[1]})")
    arrow = "const double = x => x * 2;\n"
    match, after = only(
        edits_of(arrow, "javascript", "add-parameter"), r"Add a parameter `(.+)` to `double`\."
    )
    assert after == f"const double = (x, {match[1]}) => x * 2;\n"


def test_remove_parameter_only_offers_unused_ones_and_never_self() -> None:
    before = (
        "class Scaler:\n"
        "    def scale(self, values, factor, unused=None):\n"
        "        return [v * factor for v in values]\n"
    )
    edits = edits_of(before, "python", "remove-parameter")
    assert [e.example.instruction for e in edits] == [
        "Remove the unused parameter `unused` from `Scaler.scale`."
    ]
    assert edits[0].example.after == before.replace(", unused=None", "")
    js = "function greet(name, unused) {\n  return `hi ${name}`;\n}\n"
    (edit,) = edits_of(js, "javascript", "remove-parameter")
    assert edit.example.instruction == "Remove the unused parameter `unused` from `greet`."
    assert edit.example.after == js.replace("(name, unused)", "(name)")


def test_getters_and_setters_keep_their_parameters() -> None:
    before = (
        "class Box {\n"
        "  get label() {\n"
        "    return 'box';\n"
        "  }\n"
        "\n"
        "  set value(unused) {\n"
        "    this.touched = true;\n"
        "  }\n"
        "\n"
        "  open(unused) {\n"
        "    return this.touched;\n"
        "  }\n"
        "}\n"
    )
    added = edits_of(before, "javascript", "add-parameter")
    assert [re.search(r"to `([\w.]+)`", e.example.instruction)[1] for e in added] == ["Box.open"]
    (removed,) = edits_of(before, "javascript", "remove-parameter")
    assert removed.example.instruction == "Remove the unused parameter `unused` from `Box.open`."


def test_add_docstring_only_for_undocumented_functions() -> None:
    before = (
        "def load_config(path):\n"
        '    """Read the settings file."""\n'
        "    return path.read_text()\n"
        "\n"
        "\n"
        "def is_empty(queue):  # cheap\n"
        "    return not queue\n"
    )
    (edit,) = edits_of(before, "python", "add-docstring")
    assert edit.example.instruction == 'Add the docstring "Return whether empty." to `is_empty`.'
    assert edit.example.after == before.replace(
        "# cheap\n", '# cheap\n    """Return whether empty."""\n'
    )
    js = (
        "/** Read the settings file. */\n"
        "export function loadConfig(path) {\n"
        "  return read(path);\n"
        "}\n"
        "\n"
        "export function loadUser(id) {\n"
        "  return fetch(id);\n"
        "}\n"
    )
    (edit,) = edits_of(js, "javascript", "add-docstring")
    assert edit.example.instruction == 'Add the JSDoc comment "Load user." to `loadUser`.'
    assert edit.example.after == js.replace(
        "export function loadUser", "/** Load user. */\nexport function loadUser"
    )


def test_change_constant_only_for_literals_unique_in_their_scope() -> None:
    before = (
        "def retry(call):\n"
        "    for attempt in range(3):\n"
        "        if call(attempt, 2, 2):\n"
        "            return 'done'\n"
        "    return None\n"
    )
    edits = edits_of(before, "python", "change-constant")
    olds = sorted(
        re.match(r"Change the constant `([^`]+)`", e.example.instruction)[1] for e in edits
    )
    assert olds == ["'done'", "3"]
    match, after = only(edits, r"Change the constant `3` to `(\d+)` in `retry`\.")
    assert match[1] != "3"
    assert after == before.replace("range(3)", f"range({match[1]})")


def test_delete_statement_keeps_every_block_non_empty() -> None:
    before = (
        "def report(rows):\n"
        "    count = len(rows)\n"
        "    if count:\n"
        "        print(count)\n"
        "    log.info('report done')\n"
        "    return count\n"
    )
    edits = edits_of(before, "python", "delete-statement")
    assert sorted(e.example.instruction for e in edits) == [
        "Delete the statement `count = len(rows)` from `report`.",
        "Delete the statement `log.info('report done')` from `report`.",
    ]
    _, after = only(edits, r"Delete the statement `log.info\('report done'\)` from `report`\.")
    assert after == before.replace("    log.info('report done')\n", "")


def test_wrap_try_indents_the_statement_inside_the_handler() -> None:
    before = (
        "def read(path):\n"
        "    with open(path) as handle:\n"
        "        data = handle.read()\n"
        "    return data\n"
    )
    edits = edits_of(before, "python", "wrap-try")
    match, after = only(
        edits,
        r"Wrap `with open\(path\) as handle: \.\.\.` in `read` in a try/except that ignores `(\w+)`\.",
    )
    assert after == (
        "def read(path):\n"
        "    try:\n"
        "        with open(path) as handle:\n"
        "            data = handle.read()\n"
        f"    except {match[1]}:\n"
        "        pass\n"
        "    return data\n"
    )
    js = "class Store {\n\tsave(item) {\n\t\tthis.db.put(item);\n\t}\n}\n"
    _, after = only(
        edits_of(js, "javascript", "wrap-try"),
        r"Wrap `this\.db\.put\(item\);` in `Store\.save` in a try/catch .*",
    )
    assert after == (
        "class Store {\n\tsave(item) {\n\t\ttry {\n\t\t\tthis.db.put(item);\n"
        "\t\t} catch (error) {\n\t\t\tconsole.error(error);\n\t\t}\n\t}\n}\n"
    )


def test_crlf_files_keep_their_line_endings() -> None:
    before = "def total(values):\r\n    result = sum(values)\r\n    return result\r\n"
    for family in ("add-docstring", "wrap-try"):
        for edit in edits_of(before, "python", family):
            assert "\n" not in edit.example.after.replace("\r\n", "")


@pytest.fixture()
def sources(tmp_path: Path) -> Path:
    for text, name in LANGUAGES.values():
        (tmp_path / "src" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "src" / name).write_text(text)
    (tmp_path / "src" / "node_modules").mkdir()
    (tmp_path / "src" / "node_modules" / "dep.js").write_text("function dep(a) { return 1; }\n")
    (tmp_path / "src" / "notes.txt").write_text("not code\n")
    return tmp_path / "src"


def test_synthesize_is_deterministic_by_seed_and_per_file(sources: Path) -> None:
    first = synthesize([sources], per_file=4, seed=7)
    assert first == synthesize([sources], per_file=4, seed=7)
    assert {example.before for example in first} == {INVENTORY_PY, CART_JS}
    assert len(first) == 8
    assert (
        len({tuple(e.id for e in synthesize([sources], per_file=4, seed=s)) for s in range(4)}) > 1
    )
    alone = synthesize([sources / "cart.js"], per_file=4, seed=7)
    assert alone == [example for example in first if example.before == CART_JS]


def test_families_take_turns_and_can_be_chosen(sources: Path) -> None:
    edits = generate([sources / "inventory.py"], per_file=len(FAMILIES), seed=1)
    assert sorted(edit.family for edit in edits) == sorted(FAMILIES)
    chosen = generate([sources], per_file=3, seed=1, families=["wrap-try", "rename-local"])
    assert {edit.family for edit in chosen} == {"wrap-try", "rename-local"}
    with pytest.raises(DatasetError, match="unknown edit family 'bogus'"):
        generate([sources], per_file=3, seed=1, families=["bogus"])


def test_long_files_give_whole_top_level_definitions(tmp_path: Path) -> None:
    path = tmp_path / "inventory.py"
    path.write_text(INVENTORY_PY)
    edits = synthesize([path], per_file=50, seed=3, max_lines=12)
    befores = {example.before for example in edits}
    restock = INVENTORY_PY[
        INVENTORY_PY.index("def restock") : INVENTORY_PY.index("class Inventory")
    ]
    assert befores == {restock.rstrip("\n") + "\n"}
    bigger = synthesize([path], per_file=50, seed=3, max_lines=20)
    assert INVENTORY_PY[INVENTORY_PY.index("class Inventory") :] in {e.before for e in bigger}


def test_bad_paths_raise_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file or folder"):
        synthesize([tmp_path / "missing.py"], per_file=1, seed=0)
    (tmp_path / "notes.txt").write_text("text\n")
    with pytest.raises(DatasetError, match="not a Python or JavaScript file"):
        synthesize([tmp_path / "notes.txt"], per_file=1, seed=0)


def test_cad_data_synth_writes_jsonl_and_a_summary(sources: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "synthetic.jsonl"
    runner = CliRunner()
    args = ["data", "synth", str(sources), "--out", str(out), "--per-file", "3", "--seed", "5"]
    result = runner.invoke(app, [*args, "--family", "add-parameter", "--family", "wrap-try"])
    assert result.exit_code == 0, result.output
    written = load_jsonl(out)
    expected = synthesize([sources], per_file=3, seed=5, families=["add-parameter", "wrap-try"])
    assert written == expected
    counts = {f: sum(f in e.instruction for e in written) for f in ("parameter", "Wrap")}
    assert re.fullmatch(
        rf"wrote 6 edits to {re.escape(str(out))} \(add-parameter {counts['parameter']}, "
        rf"wrap-try {counts['Wrap']}\)\n",
        result.stderr,
    )

    listed = runner.invoke(app, ["data", "synth", "--list-families"])
    assert listed.exit_code == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == list(FAMILIES)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{src}", "--out", "{out}", "--family", "bogus"], "error: unknown edit family 'bogus'"),
        (["MISSING", "--out", "{out}"], "error: MISSING: no such file or folder"),
        (["{src}"], "error: --out FILE.jsonl is required"),
        (["--out", "{out}"], "error: no source files or folders given"),
    ],
)
def test_cad_data_synth_errors_are_one_line(
    args: list[str], message: str, sources: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "x.jsonl"
    command = [arg.format(src=sources, out=out) for arg in args]
    monkeypatch.setattr(sys, "argv", ["cad", "data", "synth", *command])
    with pytest.raises(SystemExit) as exited:
        main()
    stderr = capsys.readouterr().err
    assert exited.value.code == 1
    assert stderr.startswith(message) and stderr.count("\n") == 1
    assert not out.exists()
