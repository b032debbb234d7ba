"""docs/commands.md: the page is what the commands print, and names every option of the Python parsers."""

import re

from tfcluster.commands import docs as commands_doc
from tfcluster.commands import run, workers

from tests.conftest import ROOT


def test_the_commands_page_is_what_the_commands_print(sandbox, monkeypatch):
    # Rendered from the project itself (each --help is shown above to touch nothing), with the
    # fake docker first on PATH all the same.
    monkeypatch.setenv("PATH", sandbox.environment["PATH"])
    assert (ROOT / "docs" / "commands.md").read_text() == commands_doc.render(), (
        "docs/commands.md is out of date: python3 scripts/commands_doc.py"
    )
    assert not sandbox.calls.exists()


def test_every_option_of_the_python_parsers_is_on_the_commands_page():
    page = (ROOT / "docs" / "commands.md").read_text()
    for parser in (run.parser(), workers.parser()):
        for option in parser.option_strings():
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", page), option
