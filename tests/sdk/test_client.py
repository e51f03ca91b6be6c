"""Client construction, ownership of the HTTP client, and the public exports."""

from __future__ import annotations

import inspect
import types

import httpx
import pytest

import memplane
from memplane import _exceptions

from .helpers import API_KEY, BASE_URL, Recorder


def test_every_name_in_all_exists() -> None:
    missing = [name for name in memplane.__all__ if not hasattr(memplane, name)]
    assert missing == []


def test_every_public_name_is_in_all() -> None:
    for name in memplane._LAZY:  # imported on first use: every one the package can give
        getattr(memplane, name)
    public = {
        name
        for name, value in vars(memplane).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(memplane.__all__) - {"__version__"}


def test_every_exception_class_is_exported() -> None:
    classes = {
        name
        for name, value in vars(_exceptions).items()
        if inspect.isclass(value) and issubclass(value, memplane.MemplaneError)
    }
    assert classes <= set(memplane.__all__)


def test_version() -> None:
    assert memplane.__version__ == "0.1.0"


def test_repr_shows_the_url_but_never_the_key() -> None:
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(Recorder())) as client:
        assert repr(client) == "Client(base_url='http://memplane.test')"


@pytest.mark.parametrize(
    ("base_url", "api_key", "message"),
    [
        ("", API_KEY, "base_url must be a non-empty URL"),
        (BASE_URL, "", "api_key must be a non-empty string"),
    ],
)
def test_empty_url_or_key_is_refused(base_url: str, api_key: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        memplane.Client(base_url, api_key)


def test_http_client_and_transport_are_exclusive() -> None:
    with httpx.Client() as http:
        with pytest.raises(ValueError, match="either http_client or transport"):
            memplane.Client(
                BASE_URL, API_KEY, http_client=http, transport=httpx.MockTransport(Recorder())
            )


def test_close_closes_the_client_it_made() -> None:
    client = memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(Recorder()))
    with client:
        pass

    assert client._http.is_closed


def test_close_leaves_an_injected_client_open() -> None:
    with httpx.Client(transport=httpx.MockTransport(Recorder())) as http:
        with memplane.Client(BASE_URL, API_KEY, http_client=http):
            pass

        assert not http.is_closed


def test_timeout_is_applied_to_the_client_it_makes() -> None:
    with memplane.Client(BASE_URL, API_KEY, timeout=2.5) as client:
        assert client._http.timeout == httpx.Timeout(2.5)
