"""A page opened in a real headless browser (Chromium, Debian's package; scripts/test installs it):
what its scripts left in the DOM, every request it made (Chromium's own network log), and a
screenshot, for tests of the run's report (tfcluster/report/)."""

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless in a container as root: no sandbox, no GPU, no first-run work; the virtual time budget
# lets the page's scripts finish before the DOM or the screenshot is taken.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
    # Chromium's own calls home (update checks, network time, account look-ups): turned off, and
    # every host name resolved to nothing and every request sent to a closed port on loopback, so
    # that none leaves this machine whatever Chromium tries. What it tries is still in its log.
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,MediaRouter,"
    "AutofillServerCommunication,CertificateTransparencyComponentUpdater",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-pings",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
]


@dataclass(frozen=True)
class Opened:
    dom: str
    requests: list[str]  # Every URL the page requested while it loaded (not Chromium's own).
    screenshot: Path


def open_page(page: Path, work: Path, *, width: int = 1280, height: int = 3000) -> Opened:
    """Loads `page` twice (the DOM once, the screenshot once: Chromium does one per start), with a
    network log each time; fails the test if Chromium is missing or fails."""
    assert BROWSER, "no chromium on this machine (scripts/test installs Debian's chromium)"
    url = page.resolve().as_uri()
    requests = []
    profile = work / "profile"
    dom = _chromium([f"--user-data-dir={profile}", "--dump-dom", url], work / "dom.netlog", requests)
    shot = work / "screenshot.png"
    _chromium(
        [f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--screenshot={shot}", url],
        work / "shot.netlog",
        requests,
    )
    assert shot.is_file(), "chromium wrote no screenshot"
    return Opened(dom=dom, requests=requests, screenshot=shot)


def pixels(screenshot: Path, colour: str, *, tolerance: int = 10) -> int:
    """How many of the screenshot's pixels are `colour` (#rrggbb), give or take `tolerance` a channel."""
    from PIL import Image

    wanted = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    with Image.open(screenshot) as image:
        rgb = image.convert("RGB")
        return sum(
            count
            for count, found in rgb.getcolors(maxcolors=1 << 24)
            if all(abs(a - b) <= tolerance for a, b in zip(found, wanted, strict=True))
        )


def _chromium(arguments: list[str], netlog: Path, requests: list[str]) -> str:
    done = subprocess.run(
        [BROWSER, *FLAGS, f"--log-net-log={netlog}", "--net-log-capture-mode=Everything", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    requests += _urls(netlog)
    return done.stdout


def _urls(netlog: Path) -> list[str]:
    """The URL of every request the page made: each job the network stack started whose initiator
    is the page's origin (a file's is "null"). Chromium's own requests (its update and account
    checks, sent nowhere here) have none: "not an origin"."""
    log = json.loads(netlog.read_text(encoding="utf-8", errors="replace"))
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    jobs = [event.get("params") or {} for event in log.get("events", []) if event.get("type") == start]
    # Each job's start has its parameters; its end has none.
    return [job["url"] for job in jobs if "url" in job and job.get("initiator") != "not an origin"]
