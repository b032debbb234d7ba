"""The report as one HTML file: the run's data as JSON inside it, Chart.js inside it, no request
outside it (its Content-Security-Policy forbids any), so that it opens from a CI artifact anywhere.

The page draws its charts from the data when it opens, and says on its `<body>` what it drew
(`data-charts`) and any error (`data-errors`): what the browser test reads.
"""

import html
import json
import math
from pathlib import Path

VENDOR = Path(__file__).resolve().parent / "vendor"
# Chart.js 3.9.1 (MIT), as Debian ships it: libjs-chart.js 3.9.1+~0.2.1-2's
# /usr/share/javascript/chart.js/chart.min.js, with the package's copyright file beside it.
CHART_JS = VENDOR / "chart.min.js"
CHART_JS_SHA256 = "fbc45926e6b46845a0f905552a0e0b1331049bff1115ecf94dbe0904d895e710"
POLICY = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1180px;padding:18px;color:#1d2330}
h1{font-size:20px;margin:0 0 6px}h2{font-size:16px;margin:26px 0 8px;border-bottom:1px solid #dde}
.verdict{font:600 16px ui-monospace,monospace;padding:10px 12px;border-radius:6px}
.PASS{background:#e3f6e8;color:#0d5a26}.FAIL{background:#fde6e6;color:#8a1010}
pre{background:#f5f6f8;padding:10px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;line-height:1.35}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #dde;padding:3px 8px;text-align:left}
th{background:#f1f2f6}.chart{position:relative;height:300px}.timeline{position:relative}
.note{color:#667;font-size:12px}ul.problems li{color:#8a1010}
"""


def render(data: dict) -> str:
    """The whole page for a run's data (tfcluster/report/__init__.py's `data`)."""
    verdict = data.get("verdict") or {}
    passed = verdict.get("passed")
    word = "PASS" if passed else "FAIL"
    summary = data.get("summary") or (f"verdict: {word}" if verdict else "no verdict: the run gave none")
    problems = "".join(f"<li>{html.escape(p)}</li>" for p in verdict.get("problems", []))
    # Every `<` escaped: no `</script>` or `<!--` in the data can end or change the script holding it.
    payload = json.dumps(_finite(data), separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{POLICY}">
<title>tfcluster run {html.escape(data.get("project", ""))}: {word if verdict else "no verdict"}</title>
<style>{_STYLE}</style></head>
<body data-charts="0" data-errors="">
<h1>tfcluster run <code>{html.escape(data.get("project", ""))}</code></h1>
<div class="note">{html.escape(data.get("written", ""))} &middot; {len(data.get("workers", []))} worker(s)</div>
<p class="verdict {word if verdict else "FAIL"}">{html.escape(summary)}</p>
<ul class="problems">{problems}</ul>
<h2>Metrics by epoch</h2><div id="metrics"></div>
<h2>Model state: where the workers were compared</h2><div class="chart"><canvas id="states"></canvas></div>
<div class="note" id="states-note"></div>
<h2>Timeline</h2><div class="timeline"><canvas id="timeline"></canvas></div>
<h2>Workers</h2><div id="workers"></div>
<h2>Proofs</h2><div id="proofs"></div>
<h2>The verifier's table</h2><pre>{html.escape(chr(10).join(data.get("verifier", [])))}</pre>
<p class="note">Charts by Chart.js 3.9.1 (MIT licence, embedded). Rebuild this page from the run's
saved record with <code>scripts/report {html.escape(data.get("folder", "FOLDER"))}</code>.</p>
<script type="application/json" id="run">{payload}</script>
<script>{CHART_JS.read_text(encoding="utf-8")}</script>
<script>{_script()}</script>
</body></html>
"""


def _finite(value):
    """The data with every NaN or infinity as its name (a loss that diverged): JSON has no number
    for them, and a chart leaves a gap where a value is not a number."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _script() -> str:
    return (VENDOR.parent / "page.js").read_text(encoding="utf-8")
