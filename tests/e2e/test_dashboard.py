"""The dashboard in a real headless browser (Debian's chromium through chromedriver),
against `vfl coordinator serve --ui` and two party daemons as separate processes: the
page renders, the job list matches `vfl jobs`, and a running job's curve grows.

The browser is installed with apt when missing and the tests run as root (as in CI);
otherwise they skip, saying why. Set VFL_DASHBOARD_SCREENSHOT=/tmp/job.png to keep the
screenshot of the job page taken while it trains.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.data import FATE
from tests.support.processes import Daemons

pytestmark = pytest.mark.subprocess

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is missing: pip install -e '.[test]'"
)

JOB = """
job: {name}
parties:
  - {{id: bank, role: active, data: {{dataset: {dataset}}}}}
  - {{id: shop, role: passive, data: {{dataset: breast}}}}
local_updates: {{mode: celu, workset: 3, reuse: 3, schedule: sync}}
train: {{epochs: {epochs}, batch_size: 32}}
validation: {{every: 10}}
network: {{bandwidth_mbps: 100, rtt_ms: {rtt_ms}}}
"""


def browser_tools() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installed with apt if missing and root."""
    found = shutil.which("chromium"), shutil.which("chromedriver")
    if all(found):
        return found[0] or "", found[1] or ""
    if os.geteuid() != 0:
        pytest.skip(
            "chromium or chromedriver is missing and the tests do not run as root to install "
            "them: apt-get install -y chromium chromium-driver"
        )
    steps = (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"])
    for cmd in (*steps, ["apt-get", "install", "-y", "-qq", "chromium-driver"]):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        if done.returncode != 0:
            pytest.skip(f"cannot install chromium ({' '.join(cmd)}): {done.stderr[-300:]}")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("apt installed chromium but chromium or chromedriver is not on PATH")
    return chromium, driver


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = browser_tools()
    options = Options()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1100"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def daemons(tmp_path_factory) -> Iterator[tuple[Daemons, str]]:
    """Coordinator with the dashboard on a port the OS picks, bank and shop; and the
    login address the coordinator printed."""
    workdir = tmp_path_factory.mktemp("dashboard")
    d = Daemons(workdir, coordinator_args=("--ui", "127.0.0.1:0"))
    try:
        d.start_coordinator()
        bank = {
            "breast": {"path": str(FATE / "breast_hetero_guest.csv"), "label": "y"},
            "unlabelled": {"path": str(FATE / "breast_hetero_guest.csv")},  # fails a job
        }
        d.start_party("bank", bank)
        d.start_party("shop", {"breast": {"path": str(FATE / "breast_hetero_host.csv")}})
        log = (workdir / "coordinator.log").read_text()
        found = re.search(r"dashboard \(read-only\): (http://127\.0\.0\.1:\d+/\?token=\S+)", log)
        assert found, log
        yield d, found.group(1)
    finally:
        d.stop()


def submit(d: Daemons, name: str, dataset: str = "breast", epochs: int = 1, rtt_ms: int = 1):
    spec = d.workdir / f"{name}.yaml"
    spec.write_text(JOB.format(name=name, dataset=dataset, epochs=epochs, rtt_ms=rtt_ms))
    done = d.vfl("submit", str(spec))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def until(check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    """`check()`'s first truthy value, polled every 0.2 s for up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what or check}")


def page_jobs(browser) -> dict[str, str]:
    rows = browser.find_elements("css selector", "#jobs tr[data-job]")
    return {r.get_attribute("data-job"): r.get_attribute("data-state") for r in rows}


def cli_jobs(d: Daemons) -> dict[str, str]:
    done = d.vfl("jobs")
    assert done.returncode == 0, done.stderr
    return {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()[1:]}


def points(browser, chart: str) -> int:
    found = browser.find_elements("css selector", f"#chart-{chart}")
    return int(found[0].get_attribute("data-points") or 0) if found else 0


def test_the_job_list_matches_vfl_jobs(daemons, browser):
    # Prepare: a job that succeeds and one that fails (bank's 'unlabelled' has no label)
    d, login = daemons
    ok, bad = submit(d, "good"), submit(d, "bad", dataset="unlabelled")
    d.wait(ok, lambda v: v.state == "SUCCEEDED")
    d.wait(bad, lambda v: v.state == "FAILED")

    # Execute: log in with the printed address (the token moves into a cookie)
    browser.get(login)
    until(lambda: len(page_jobs(browser)) == 2, what="two jobs in the list")

    # Assert
    assert "token=" not in browser.current_url
    assert page_jobs(browser) == cli_jobs(d) == {ok: "SUCCEEDED", bad: "FAILED"}
    assert browser.find_element("css selector", "h2").text == "Jobs (2)"


def test_a_running_jobs_curves_grow(daemons, browser, tmp_path: Path):
    d, login = daemons
    base = login.split("/?token=")[0]
    job_id = submit(d, "slow", epochs=6, rtt_ms=30)
    browser.get(f"{base}/#/job/{job_id}")

    # the loss curve gets points while the job trains, and more of them later
    first = until(lambda: points(browser, "loss"), what="a first point of the loss curve")
    until(lambda: points(browser, "bytes") and points(browser, "validation"), what="curves")
    shot = tmp_path / "job.png"
    browser.save_screenshot(str(shot))
    state = browser.find_element("id", "job-title").get_attribute("data-state")
    assert state == "TRAINING", state
    later = until(lambda: points(browser, "loss") > first and points(browser, "loss"))
    assert later > first
    if os.environ.get("VFL_DASHBOARD_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["VFL_DASHBOARD_SCREENSHOT"])

    # once it ends the page says so, with every curve (CELU: local updates too)
    d.wait(job_id, lambda v: v.state == "SUCCEEDED")
    title = browser.find_element("id", "job-title")
    until(lambda: title.get_attribute("data-state") == "SUCCEEDED", what="SUCCEEDED")
    for chart in ("loss-seconds", "validation-seconds", "updates"):
        assert points(browser, chart) > 0, chart
    assert browser.find_elements("css selector", "#chart-loss canvas")  # uPlot drew it
    assert "celu" in browser.find_element("id", "spec").text

    # the risk team's reading: KS, Gini and AUC, ten bands of lift and of calibration
    summary = until(lambda: browser.find_elements("id", "evaluation-summary"), what="KS")
    assert summary[0].text.startswith("KS ") and "Gini" in summary[0].text
    assert len(browser.find_elements("css selector", "#lift tr")) == 11  # a header, 10 bands
    assert len(browser.find_elements("css selector", "#calibration tr")) == 11
    assert browser.find_elements("css selector", "#chart-gains canvas")
    # and a prediction of its model: each party's population stability
    done = d.vfl("predict", job_id, "--data", "bank=breast", "--data", "shop=breast", "--json")
    assert done.returncode == 0, done.stderr
    browser.get(f"{base}/#/job/{json.loads(done.stdout)['job']}")
    rows = until(
        lambda: browser.find_elements("css selector", "#stability tr[data-party]"), what="PSI"
    )
    assert {r.get_attribute("data-party") for r in rows} == {"bank", "shop"}


def test_parties_and_models_pages_and_nothing_fetched_from_elsewhere(daemons, browser):
    d, login = daemons
    base = login.split("/?token=")[0]
    browser.get(f"{base}/#/parties")
    rows = until(
        lambda: browser.find_elements("css selector", "#parties tr[data-party]"), what="parties"
    )
    health = {
        r.get_attribute("data-party"): r.find_elements("tag name", "td")[2].text for r in rows
    }
    assert health == {"bank": "answering", "shop": "answering"}

    browser.get(f"{base}/#/models")
    models = until(
        lambda: browser.find_elements("css selector", "#models tr[data-model]"), what="models"
    )
    assert {m.get_attribute("data-model") for m in models} == {
        j for j, s in cli_jobs(d).items() if s == "SUCCEEDED" and "-predict-" not in j
    }

    loaded = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert loaded and all(url.startswith(base + "/") for url in loaded), loaded
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors  # no script error, no blocked (CSP) load


def test_a_page_left_while_it_reads_does_not_draw_over_the_next(daemons, browser):
    # Prepare: the network slows the models page's read by 1.5 s (the coordinator asks
    # every party; one that is down keeps it 3 s)
    d, login = daemons
    base = login.split("/?token=")[0]
    browser.get(f"{base}/#/parties")
    until(lambda: browser.find_elements("css selector", "#parties"), what="parties")
    browser.execute_script(
        """const real = window.fetch;
        window.modelsRead = 0;
        window.fetch = async (url, opts) => {
          const slow = String(url).includes("/api/models");
          if (slow) await new Promise((r) => setTimeout(r, 1500));
          const resp = await real(url, opts);
          if (slow) window.modelsRead += 1;
          return resp;
        };
        window.drawn = [];  // every page drawn from now on, by its heading
        new MutationObserver(() => {
          const h = document.querySelector("#main h2");
          if (h) window.drawn.push(h.textContent);
        }).observe(document.getElementById("main"), { childList: true });"""
    )
    # Execute: open the models page, and the parties page before its read returns
    browser.execute_script("location.hash = '#/models'")
    time.sleep(0.3)
    browser.execute_script("location.hash = '#/parties'")
    until(lambda: browser.execute_script("return window.modelsRead"), what="the models read")
    time.sleep(0.5)  # (its page would be drawn by now)
    # Assert: the models page was never drawn; the parties page stays, with no error
    drawn = browser.execute_script("return window.drawn")
    assert not [h for h in drawn if h.startswith("Models")], drawn
    until(lambda: browser.find_elements("css selector", "#parties tr[data-party]"), what="rows")
    assert not browser.find_elements("css selector", "#models")
    assert "cannot read" not in browser.find_element("id", "status").text
    time.sleep(5.5)  # past the parties page's next poll and the models page's would-be one
    assert browser.find_elements("css selector", "#parties")
    assert not browser.find_elements("css selector", "#models")
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_an_analysis_shows_a_table_per_party(daemons, browser):
    # Prepare
    d, login = daemons
    base = login.split("/?token=")[0]
    spec = d.workdir / "woe.yaml"
    spec.write_text(
        "job: woe\nparties:\n"
        "  - {id: bank, role: active, data: {dataset: breast}}\n"
        "  - {id: shop, role: passive, data: {dataset: breast}}\n"
        "crypto: {key_bits: 1024, allow_insecure_test_keys: true}\n"
    )
    # Execute
    done = d.vfl("analyze", str(spec), "--coordinator", d.address, "--json")
    assert done.returncode == 0, done.stderr
    job_id = json.loads(done.stdout)["job"]
    browser.get(f"{base}/#/job/{job_id}")
    # Assert: bank's 10 columns and shop's 20, each with its IV, strongest first
    rows = until(
        lambda: browser.find_elements("css selector", "#analysis-shop tr[data-column]"),
        what="the shop's columns",
    )
    assert len(rows) == 20
    assert len(browser.find_elements("css selector", "#analysis-bank tr[data-column]")) == 10
    ivs = [float(r.find_elements("tag name", "td")[1].text) for r in rows]
    assert ivs == sorted(ivs, reverse=True) and ivs[0] > 0.5
