"""The package metadata: what each extra installs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def extras() -> dict[str, list[str]]:
    with open(PYPROJECT, "rb") as file:
        project = tomllib.load(file)["project"]
    return dict(project["optional-dependencies"])


def test_the_all_extra_holds_every_extra_but_the_tests() -> None:
    found = extras()
    (requirement,) = found["all"]
    match = re.fullmatch(r"rlpulse\[([a-z,]+)\]", requirement)
    assert match is not None, requirement

    assert sorted(match.group(1).split(",")) == sorted(set(found) - {"all", "test"})


def test_no_extra_pins_torch() -> None:
    for name, requirements in extras().items():
        for requirement in requirements:
            assert not re.fullmatch(r"torch\W.*", requirement), (name, requirement)


def test_make_demo_installs_what_the_readme_watches_the_demo_with(
    tmp_path: Path,
) -> None:
    # README: watch the demo in `rlpulse top` (rich) and read its chart
    # (matplotlib) after.
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    planned = subprocess.run(
        ["make", "--dry-run", "demo", f"VENV={tmp_path / 'venv'}"],
        cwd=PYPROJECT.parent,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    [installed] = re.findall(r'-e "\.\[([a-z,]+)\]"', planned)

    assert {"torchrl", "plot", "top"} <= set(installed.split(","))
