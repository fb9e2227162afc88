"""What tests of several commands share."""

import pytest
from typer.testing import CliRunner

from frobozz.cli._app import app


@pytest.fixture
def cli(cortex_settings, monkeypatch, tmp_path):
    """`cli(*args, code=0)`: a frobozz command run in this process on the test's database (wide output); its
    output."""
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def invoke(*args, code=0):
        done = runner.invoke(app, list(args), env={"COLUMNS": "500"})
        assert done.exit_code == code, done.output
        return done.output

    return invoke
