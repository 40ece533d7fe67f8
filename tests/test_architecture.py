"""The architecture as a contract: what each layer may import.

The core (schedules, metrics, targets, distributions, text, naming,
verdict, watch, runtime, monitor) knows no integration: it imports nothing
from ``rlpulse.sources``, ``rlpulse.sinks``, ``rlpulse.formats``,
``rlpulse.read``, ``rlpulse._demo``, ``rlpulse.cli``, TorchRL or Ray, and
names none of them in a string (docstrings aside). Inside the core,
each layer imports only the layers below it. A file format lives in
``rlpulse.formats`` alone: the sinks write through it and ``rlpulse.read``
reads through it, so no sink imports ``rlpulse.read`` and the formats
import neither. Read from the source with :mod:`ast`, imports inside
functions included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "src" / "rlpulse"

# Core layers, lowest first: a module may import its own layer and those before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "rlpulse.schedules",
        "rlpulse.metrics",
        "rlpulse.targets",
        "rlpulse.distributions",
        "rlpulse.text",
        "rlpulse.naming",
        "rlpulse.verdict",
    ),
    ("rlpulse.watch",),
    ("rlpulse.runtime",),
    ("rlpulse.monitor",),
)
CORE = tuple(name for layer in LAYERS for name in layer)
FORBIDDEN = (
    "rlpulse.sources",
    "rlpulse.sinks",
    "rlpulse.formats",
    "rlpulse.read",
    "rlpulse._demo",
    "rlpulse.cli",
    "torchrl",
    "ray",
)
# How a string in the core would name an integration or an outer layer.
NAMED = re.compile(
    r"\b(torchrl|ray|rlpulse\.(sources|sinks|formats|read|_demo))\b", re.I
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def core_modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if any(within(module_name(path), core) for core in CORE)
    ]


def imports_of(path: Path) -> list[str]:
    return imports_in(path.read_text(), package=module_name(path).rsplit(".", 1)[0])


def imports_in(text: str, *, package: str) -> list[str]:
    """Every module a source text imports, relative imports resolved from ``package``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = [node.module or ""]
            if node.level:
                parts = [*package.split(".")[: 1 - node.level or None], *parts]
            base = ".".join(part for part in parts if part)
            found.append(base)
            found.extend(f"{base}.{alias.name}" for alias in node.names)
    return found


def strings_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def layer_of(name: str) -> int:
    for index, layer in enumerate(LAYERS):
        if any(within(name, member) for member in layer):
            return index
    raise AssertionError(f"{name} is in no core layer")


def test_the_core_is_found() -> None:
    names = {module_name(path) for path in core_modules()}
    assert {"rlpulse.monitor", "rlpulse.watch", "rlpulse.runtime.engine"} <= names


@pytest.mark.parametrize("path", core_modules(), ids=module_name)
def test_the_core_imports_no_integration_and_no_outer_layer(path: Path) -> None:
    outside = [
        name
        for name in imports_of(path)
        if any(within(name, forbidden) for forbidden in FORBIDDEN)
    ]
    assert outside == [], f"{module_name(path)} imports {outside}"


@pytest.mark.parametrize("path", core_modules(), ids=module_name)
def test_the_core_names_no_integration_in_its_strings(path: Path) -> None:
    named = [text for text in strings_of(path) if NAMED.search(text)]
    assert named == [], f"{module_name(path)} names {named}"


@pytest.mark.parametrize("path", core_modules(), ids=module_name)
def test_each_core_layer_imports_only_the_layers_below(path: Path) -> None:
    own = layer_of(module_name(path))
    above = [
        name
        for name in imports_of(path)
        if within(name, "rlpulse")
        and name != "rlpulse"
        and any(within(name, core) for core in CORE)
        and layer_of(name) > own
    ]
    assert above == [], f"{module_name(path)} imports {above} from a higher layer"


def modules_in(package: str) -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if within(module_name(path), package)
    ]


@pytest.mark.parametrize("path", modules_in("rlpulse.sinks"), ids=module_name)
def test_a_sink_writes_through_the_formats_never_through_the_readers(
    path: Path,
) -> None:
    readers = [name for name in imports_of(path) if within(name, "rlpulse.read")]
    assert readers == [], f"{module_name(path)} imports {readers}"


@pytest.mark.parametrize("path", modules_in("rlpulse.formats"), ids=module_name)
def test_a_format_knows_neither_the_sinks_nor_the_readers(path: Path) -> None:
    outer = [
        name
        for name in imports_of(path)
        if within(name, "rlpulse.sinks") or within(name, "rlpulse.read")
    ]
    assert outer == [], f"{module_name(path)} imports {outer}"


def test_imports_inside_functions_and_relative_imports_are_seen() -> None:
    text = "def late():\n    from ..sources import ray\n    import torchrl.envs\n"
    found = imports_in(text, package="rlpulse.runtime")
    assert "rlpulse.sources.ray" in found
    assert "torchrl.envs" in found


def test_the_architecture_diagram_matches_the_code() -> None:
    from scripts import architecture_diagram

    assert architecture_diagram.main(["--check"]) == 0, (
        "docs/architecture.md's diagram is stale: run make diagram"
    )


def test_the_diagram_shows_the_core_importing_no_integration() -> None:
    from scripts import architecture_diagram

    core = set(architecture_diagram.CORE)
    outer = {"sources", "sinks", "formats", "read", "cli", "_demo"}
    edges = architecture_diagram.edges()
    assert ("monitor", "runtime") in edges
    assert [edge for edge in edges if edge[0] in core and edge[1] in outer] == []


def test_rich_is_imported_only_by_the_module_that_draws_the_live_view() -> None:
    importers = {
        module_name(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if any(within(name, "rich") for name in imports_of(path))
    }
    assert importers == {"rlpulse.read.top"}


# Where the tests are

# Modules whose behaviour is seen through other modules' tests, not at the
# path the layout gives them: the files that test each, and why.
# docs/architecture.md's "Where the tests are" lists the same.
TESTED_ELSEWHERE: dict[str, tuple[tuple[str, ...], str]] = {
    "formats/__init__.py": (
        ("tests/read/test_records.py", "tests/formats/test_follow.py"),
        "what reads every format alike is seen reading each format",
    ),
    "sinks/base.py": (
        tuple(
            f"tests/sinks/test_{backend}.py"
            for backend in (
                "console",
                "csv",
                "jsonl",
                "mlflow",
                "otlp",
                "prometheus",
                "sqlite",
                "tensorboard",
                "wandb",
            )
        ),
        "the scaffolding every sink shares is seen in each sink",
    ),
    "targets.py": (
        ("tests/sources/test_torchrl.py", "tests/sources/test_ray.py"),
        "a kind of target is seen in the targets of that kind",
    ),
    "sources/collectors.py": (
        ("tests/sources/test_torchrl.py",),
        "the collectors unsafe to poll from a thread are TorchRL's",
    ),
}


def layout_modules(package: Path = PACKAGE) -> list[str]:
    """The modules under ``package`` the layout gives a test file, as paths within it.

    Not a package's ``__init__.py`` (a module of its own only where
    :data:`TESTED_ELSEWHERE` lists it), ``__main__.py``, nor the private
    demo pipelines, ``_demo/``; the C extension is no ``.py`` file.
    """
    return [
        path.relative_to(package).as_posix()
        for path in sorted(package.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and path.relative_to(package).parts[0] != "_demo"
    ]


def layout_test_file(module: str) -> str:
    """Where the layout puts a module's tests: ``tests/<package>/test_<module>.py``."""
    package, _, name = module.rpartition("/")
    test_name = f"test_{name.removesuffix('.py')}.py"
    return f"tests/{package}/{test_name}" if package else f"tests/{test_name}"


def without_test_files(
    modules: list[str], elsewhere: dict[str, tuple[tuple[str, ...], str]]
) -> list[str]:
    """The modules that have no test file where the layout puts it and are not listed as tested elsewhere."""
    return [
        f"{module} (no {layout_test_file(module)})"
        for module in modules
        if not (REPO / layout_test_file(module)).is_file() and module not in elsewhere
    ]


def test_every_module_has_its_test_file_or_is_listed_with_the_files_that_test_it() -> (
    None
):
    missing = without_test_files(layout_modules(), TESTED_ELSEWHERE)
    assert missing == [], (
        f"{missing}: give each its test file, or list it in TESTED_ELSEWHERE "
        "and docs/architecture.md with the files that test it"
    )


def test_each_module_tested_elsewhere_exists_has_no_file_of_its_own_and_its_files_do() -> (
    None
):
    wrong = []
    for module, (files, reason) in TESTED_ELSEWHERE.items():
        if not (PACKAGE / module).is_file():
            wrong.append(f"{module}: no such module")
        if (REPO / layout_test_file(module)).is_file():
            wrong.append(f"{module}: has {layout_test_file(module)}, list it no more")
        wrong.extend(
            f"{module}: no {file}" for file in files if not (REPO / file).is_file()
        )
        if not files or not reason:
            wrong.append(f"{module}: give the files that test it and why")
    assert wrong == []


def test_a_module_added_without_a_test_file_is_found(tmp_path: Path) -> None:
    package = tmp_path / "rlpulse"
    for module in (
        "__init__.py",
        "__main__.py",
        "runtime/__init__.py",
        "runtime/poller.py",
        "runtime/brand_new.py",
        "_demo/synthetic.py",
        "brand_new_top.py",
    ):
        (package / module).parent.mkdir(parents=True, exist_ok=True)
        (package / module).write_text("")
    modules = layout_modules(package)
    assert modules == ["brand_new_top.py", "runtime/brand_new.py", "runtime/poller.py"]
    assert without_test_files(modules, TESTED_ELSEWHERE) == [
        "brand_new_top.py (no tests/test_brand_new_top.py)",
        "runtime/brand_new.py (no tests/runtime/test_brand_new.py)",
    ]


def listed_in_the_docs() -> dict[str, set[str]]:
    """The table of modules tested elsewhere in docs/architecture.md's "Where the tests are": each module and its files."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("\n## Where the tests are\n", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or not cells[1].strip().startswith("`"):
            continue
        (module,) = re.findall(r"`([^`]+)`", cells[1])
        listed[module] = set(re.findall(r"`(tests/[^`]+)`", cells[2]))
    return listed


def test_the_docs_list_the_same_modules_tested_elsewhere_and_the_same_files() -> None:
    assert listed_in_the_docs() == {
        module: set(files) for module, (files, _) in TESTED_ELSEWHERE.items()
    }
