"""The UI's redirect named the request's Host (red-team pass on the transport, 2026-11-27).

Found against ``cairn serve`` with a passport secret (no loopback check, so any Host is served):
Starlette's static files answer a path that names the UI's folder without its slash
(``/ui/.``, ``/ui/js/..``, ``/ui/%2e``) with a 307 whose ``Location`` is an absolute URL built
from the request's ``Host`` header: ``Host: evil.example`` got ``Location:
http://evil.example/ui/js/../``, an open redirect that a shared cache in front of Cairn (the UI's
files carry no ``Cache-Control: no-store``) could store for every visitor of that URL.

Fixed in cairn/app.py: the UI's files answer a redirect with the path alone (``WholeFiles``).
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.runtime.settings import Settings


@pytest.mark.parametrize("path", ["/ui/%2e", "/ui/js/%2e%2e", "/ui/vendor/%2E%2E?x=1"])
def test_a_static_redirect_names_no_host(settings: Settings, path: str) -> None:
    signed = settings.model_copy(update={"passport_secret": "a-long-enough-test-secret", "host": "0.0.0.0"})
    client = TestClient(create_app(signed), follow_redirects=False)  # static files need no lifespan
    resp = client.get(path, headers={"host": "evil.example"})
    assert resp.status_code == 307, resp.text[:200]
    location = resp.headers["location"]
    assert location.startswith("/ui/") and "evil" not in location, location
    assert client.get(location).status_code == 200  # still the UI
