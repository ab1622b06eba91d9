"""The linter and the formatter a library already is: `ruff check` and `ruff format --check`
over the repository, with pyproject.toml's settings (line length, rules). A line over the
limit, an unused import or an unformatted file fails here, not in a reviewer's reading."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff_passes(command):
    r = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
