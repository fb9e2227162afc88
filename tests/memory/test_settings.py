"""The memory settings refuse, when they load, a value no command could use: named as the variable it comes from,
with what is wrong, never a traceback later where it is first used."""

import pytest
from pydantic import ValidationError

from frobozz.memory import MemorySettings, make_embedder
from frobozz.memory._model_download import DownloadError, fetch
from frobozz.memory._vision import Describer
from frobozz.memory.exceptions import ImageError, MemoryStoreError

BROKEN_DATABASE_URLS = {
    "postgresql://u@h:notaport/db": "the port 'notaport' is not a number",
    "postgresql://[::1": "Invalid IPv6 URL",
    "postgresql://u:pw@h1:5432,h2:x/db": "the port 'x' is not a number",
    "postgresql://[::1/db": "Invalid IPv6 URL",
    "mysql://h/db": "not a postgresql:// URL",
}


@pytest.mark.parametrize("url", BROKEN_DATABASE_URLS)
def test_a_database_url_asyncpg_cannot_read_is_refused_when_the_settings_load(monkeypatch, url):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", url)
    with pytest.raises(ValidationError, match="database_url") as refused:
        MemorySettings()
    assert BROKEN_DATABASE_URLS[url] in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p@h:5432/db",
        "postgres://h/db",
        "postgresql://u@[::1]:5433/db",
        "postgresql://h1:5432,h2:5433/db?target_session_attrs=primary",
        "postgresql://postgres:@/postgres?host=/tmp/sockets",
        "postgresql:///db",
    ],
)
def test_a_database_url_asyncpg_reads_is_taken_as_it_is(monkeypatch, url):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", url)
    assert MemorySettings().database_url.get_secret_value() == url


@pytest.mark.parametrize(
    "variable", ["FROBOZZ_EMBEDDING_URL", "FROBOZZ_EMBEDDING_ONNX_URL", "FROBOZZ_CORTEX_VISION_URL"]
)
def test_a_url_setting_that_is_no_url_is_refused_when_the_settings_load(monkeypatch, variable):
    monkeypatch.setenv(variable, "http://[::1")
    with pytest.raises(ValidationError, match=variable.removeprefix("FROBOZZ_").lower()) as refused:
        MemorySettings()
    assert "not a URL" in str(refused.value)


def test_an_empty_onnx_url_still_means_never_fetch():
    assert MemorySettings(embedding_onnx_url="").embedding_onnx_url == ""


def test_an_invalid_default_namespace_is_refused_naming_its_setting_with_the_namespace_rule(monkeypatch):
    monkeypatch.setenv("FROBOZZ_CORTEX_DEFAULT_NAMESPACE", "bad/ns")
    with pytest.raises(ValidationError, match="cortex_default_namespace") as refused:
        MemorySettings()
    assert "not a namespace: 1-100 letters" in str(refused.value)
    monkeypatch.setenv("FROBOZZ_CORTEX_DEFAULT_NAMESPACE", "game:zork1")
    assert MemorySettings().cortex_default_namespace == "game:zork1"


@pytest.mark.anyio
async def test_a_url_no_request_can_be_made_to_is_each_users_own_clear_error_not_a_traceback(tmp_path):
    """Settings built without validation (as a test or an embedding program may) reach the clients as they are."""
    settings = MemorySettings.model_construct(
        embedding_provider="ollama", embedding_url="http://[::1", embedding_model="m", embedding_dim=4
    )
    with pytest.raises(MemoryStoreError, match="failed: Invalid port"):
        await make_embedder(settings).embed(["x"])
    with pytest.raises(ImageError, match="could not be reached"):
        await Describer(url="http://[::1", model="m", api_key=None, timeout=5).describe(b"", "note")
    with pytest.raises(DownloadError, match="is not a URL"):
        fetch("http://[::1", "0" * 64, tmp_path / "model")
