"""Who gets into the dashboard: a real coordinator with mutual TLS and `ui`, asked over
HTTPS with federation certificates, another CA's, the token, and nothing."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path

import pytest
from vfl.coordinator.client import CoordinatorClient
from vfl.coordinator.server import create_coordinator_server
from vfl.secure.pki.federation import load_identity, local_federation

from tests.support.jobs import job, wait

pytestmark = pytest.mark.grpc

GHOST = job(name="ghost").replace("id: bank", "id: carol").replace("id: shop", "id: dave")


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """A TLS coordinator with its dashboard; bank registered (at an address where nothing
    answers); two jobs, one naming bank; and another federation's CA."""
    tmp = tmp_path_factory.mktemp("ui")
    fed = local_federation(tmp / "fed", ("coordinator", "admin", "bank"))
    other = local_federation(tmp / "other", ("admin",))
    coord = create_coordinator_server(
        str(tmp / "jobs.sqlite"),
        "127.0.0.1:0",
        load_identity(fed, "coordinator"),
        control_timeout_s=0.5,
        register_wait_s=0,  # a job of parties that never registered fails at once
        ui="127.0.0.1:0",
    )
    address = f"127.0.0.1:{coord.port}"
    with CoordinatorClient(address, load_identity(fed, "bank")) as bank:
        bank.register("bank", "127.0.0.1:1", ["breast"])
    with CoordinatorClient(address, load_identity(fed, "admin")) as admin:
        ids = [admin.submit(job(name="mine")), admin.submit(GHOST)]
        for job_id in ids:  # shop, carol and dave never registered: the launch fails
            assert wait(admin, job_id).state == "FAILED"
    assert coord.ui is not None
    yield coord.ui, fed, other, ids
    coord.stop(0)


def get(ui, path: str, ca: Path | None = None, who: str | None = None, headers=None, method="GET"):
    """(status, headers, body) of one HTTPS request, with `who`'s certificate of `ca`."""
    context = ssl.create_default_context(cafile=str(ca or ui[1]) + "/ca.crt")
    if who is not None:
        files = load_identity(ca or ui[1], who)
        context.load_cert_chain(files.cert, files.key)
    host, port = ui[0].url.removeprefix("https://").split(":")
    conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def test_an_operator_certificate_reads_every_job(ui):
    server, _, _, ids = ui
    status, headers, body = get(ui, "/api/jobs", who="admin")
    assert status == 200
    assert sorted(j["job"] for j in json.loads(body)) == sorted(ids)
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert server.url.startswith("https://127.0.0.1:")


def test_a_party_certificate_reads_only_its_own_jobs_and_itself(ui):
    _, _, _, (mine, ghost) = ui
    status, _, body = get(ui, "/api/jobs", who="bank")
    assert status == 200 and [j["job"] for j in json.loads(body)] == [mine]
    status, _, body = get(ui, f"/api/jobs/{ghost}", who="bank")
    assert status == 403 and "'bank' is a party" in json.loads(body)["error"]
    status, _, body = get(ui, "/api/parties", who="bank")
    (party,) = json.loads(body)
    assert party["party"] == "bank" and party["health"] == "not answering"
    assert "127.0.0.1:1" in party["problem"] and party["datasets"] == ["breast"]


def test_the_token_logs_in_once_then_rides_in_a_cookie(ui):
    server = ui[0]
    status, _, _ = get(ui, "/api/jobs")
    assert status == 401
    status, _, _ = get(ui, f"/?token={server.token}x")
    assert status == 401
    status, headers, _ = get(ui, f"/?token={server.token}")
    assert status == 303 and headers["Location"] == "/"
    cookie = headers["Set-Cookie"]
    assert all(flag in cookie for flag in ("HttpOnly", "SameSite=Strict", "Secure"))
    status, _, body = get(ui, "/api/jobs", headers={"Cookie": cookie.split(";")[0]})
    assert status == 200 and len(json.loads(body)) == 2
    auth = {"Authorization": f"Bearer {server.token}"}
    status, _, body = get(ui, "/", headers=auth)
    assert status == 200 and b"/static/vendor/uPlot.iife.min.js" in body


def test_it_is_read_only_and_says_what_is_missing(ui):
    auth = {"Authorization": f"Bearer {ui[0].token}"}
    status, _, _ = get(ui, "/api/jobs", headers=auth, method="POST")
    assert status == 405
    status, _, body = get(ui, "/api/jobs/no-such-job", headers=auth)
    assert status == 404 and "no job 'no-such-job'" in json.loads(body)["error"]
    status, _, body = get(ui, "/api/jobs")
    assert status == 401 and b"?token=" in body and b"client certificate" in body


def test_a_certificate_of_another_federation_fails_the_handshake(ui):
    other = ui[2]
    with pytest.raises((ssl.SSLError, ConnectionError)):  # TLS 1.3: refused after the handshake
        # our CA trusts the server; the client presents another CA's admin certificate
        context = ssl.create_default_context(cafile=str(ui[1] / "ca.crt"))
        files = load_identity(other, "admin")
        context.load_cert_chain(files.cert, files.key)
        host, port = ui[0].url.removeprefix("https://").split(":")
        conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
        conn.request("GET", "/api/jobs")
        conn.getresponse().read()
