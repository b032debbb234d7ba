// Draws a run's report from its data (the JSON in #run): tfcluster/report/page.py embeds this.
// What it drew and any error are left on <body> (data-charts, data-errors) for the browser test.
"use strict";
(function () {
  const body = document.body;
  const errors = [];
  const fail = (message) => { errors.push(String(message)); body.dataset.errors = errors.join(" | "); };
  window.addEventListener("error", (event) => fail(event.message));
  // Anything the page tried to load from outside itself, which its policy refused.
  document.addEventListener("securitypolicyviolation", (event) => fail(`blocked: ${event.blockedURI}`));
  const run = JSON.parse(document.getElementById("run").textContent);
  const verdict = run.verdict || {};
  // No worker is red: red is kept for what differs, failed or was cut.
  const palette = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#0891b2", "#a16207", "#db2777", "#4d7c0f"];
  const color = (i) => palette[i % palette.length];
  const since = (t) => Math.round((t - run.origin) * 1000) / 1000;
  let drawn = 0;
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;

  function element(tag, text, className) {
    const made = document.createElement(tag);
    if (text !== undefined) made.textContent = text;
    if (className) made.className = className;
    return made;
  }
  function note(holder, text) { holder.append(element("p", text, "note")); }
  function chart(holder, height, config) {
    const box = element("div", undefined, "chart");
    box.style.height = height + "px";
    const canvas = element("canvas");
    box.append(canvas);
    holder.append(box);
    new Chart(canvas, config);
    drawn += 1;
  }
  function table(holder, head, rows) {
    const made = element("table");
    const top = element("tr");
    head.forEach((cell) => top.append(element("th", cell)));
    made.append(top);
    rows.forEach((row) => {
      const line = element("tr");
      row.forEach((cell) => line.append(element("td", cell === null || cell === undefined ? "" : String(cell))));
      made.append(line);
    });
    holder.append(made);
  }
  const tooltip = { callbacks: { label: (item) => item.raw.label || `${item.dataset.label}: ${item.formattedValue}` } };

  function metrics() {
    const holder = document.getElementById("metrics");
    const keys = [];
    run.workers.forEach((w) => w.epochs.forEach((e) => Object.keys(e).forEach((k) => {
      if (!["epoch", "step", "t"].includes(k) && !keys.includes(k)) keys.push(k);
    })));
    if (!keys.length) {
      note(holder, "No worker's log gave metrics by epoch (this project's trainer's epoch lines, or Model.fit's logs as the observer saw them).");
      return;
    }
    const differing = (verdict.synchronization || {}).first_differing;
    keys.forEach((key) => {
      const datasets = run.workers.map((w, i) => ({
        label: w.name, showLine: true, borderColor: color(i), backgroundColor: color(i), pointRadius: 3,
        data: w.epochs.filter((e) => key in e).map((e) => ({ x: e.epoch, y: e[key], label: `${w.name} epoch ${e.epoch}: ${key}=${e[key]}` })),
      }));
      // An epoch's model state: the one recorded at its end, or a checkpoint or the end at its step.
      const at = (s, e) => (s.point === "epoch" && s.index === e.epoch) || (e.step !== undefined && s.step === e.step);
      const compared = run.workers.flatMap((w) => w.epochs.filter((e) => key in e && w.states.some((s) => at(s, e)))
        .map((e) => ({ x: e.epoch, y: e[key], label: `${w.name}: model state compared at epoch ${e.epoch}` })));
      if (compared.length) {
        datasets.push({ label: "model state compared", pointRadius: 7, pointStyle: "circle", backgroundColor: "rgba(0,0,0,0)", borderColor: "#444", data: compared });
      }
      const first = differing ? run.workers.flatMap((w) => w.epochs.filter((e) => key in e && at(differing, e))
        .map((e) => ({ x: e.epoch, y: e[key], label: `${w.name}: model states first differ at epoch ${e.epoch}` }))) : [];
      if (first.length) {
        datasets.push({ label: "first differing state", pointRadius: 11, pointStyle: "crossRot", borderColor: "#b00000", borderWidth: 3, data: first });
      }
      chart(holder, 280, { type: "scatter", data: { datasets }, options: {
        plugins: { title: { display: true, text: key }, tooltip },
        scales: { x: { title: { display: true, text: "epoch" }, ticks: { stepSize: 1 } }, y: { title: { display: true, text: key } } },
      } });
    });
  }

  function states() {
    const holder = document.getElementById("states").parentElement;
    const said = document.getElementById("states-note");
    const differing = (verdict.synchronization || {}).first_differing;
    const at = (s) => differing && s.point === differing.point && s.index === differing.index;
    const datasets = run.workers.map((w, i) => ({
      label: w.name, showLine: true, borderColor: color(i), backgroundColor: color(i), pointRadius: 5,
      data: w.states.filter((s) => s.step !== null).map((s) => ({ x: since(s.t), y: s.step, label: `${w.name}: ${s.point} ${s.index} (step ${s.step}) at ${since(s.t)}s` })),
    }));
    if (differing) {
      datasets.push({
        label: "first differing state", pointRadius: 12, pointStyle: "crossRot", borderColor: "#b00000", borderWidth: 3,
        data: run.workers.flatMap((w) => w.states.filter((s) => at(s) && s.step !== null).map((s) => ({ x: since(s.t), y: s.step, label: `${w.name}: states first differ at ${s.point} ${s.index}` }))),
      });
    }
    const count = run.workers.reduce((n, w) => n + w.states.length, 0);
    said.textContent = count
      ? `${count} model state(s) recorded by the observer, each point one the verifier compared across workers` + (differing ? `; they first differ at ${differing.point} ${differing.index} (step ${differing.step}).` : ".")
      : "The observer recorded no model state: nothing was compared.";
    new Chart(document.getElementById("states"), { type: "scatter", data: { datasets }, options: {
      plugins: { tooltip }, scales: { x: { title: { display: true, text: "seconds since the first container started" } }, y: { title: { display: true, text: "step" } } },
    } });
    drawn += 1;
    holder.style.height = "300px";
  }

  function segments(list, y) {
    return list.flatMap((s) => [{ x: since(s.from), y, label: s.label }, { x: since(s.to), y, label: s.label }, { x: since(s.to), y: null }]);
  }

  function timeline() {
    const canvas = document.getElementById("timeline");
    const rows = run.workers.map((w, i) => ({ w, y: i }));
    const phaseColors = { "start-up": "#9ca3af", rendezvous: "#f59e0b", import: "#c4b5fd", training: "#2563eb" };
    const datasets = [{
      label: "container", borderColor: "#cbd5e1", borderWidth: 3, pointRadius: 0, showLine: true, spanGaps: false,
      data: rows.flatMap(({ w, y }) => (w.container.started ? segments([{ from: w.container.started, to: w.container.finished || run.end, label: `${w.name}: container` }], y + 0.3) : [])),
    }];
    Object.entries(phaseColors).forEach(([phase, shade]) => datasets.push({
      label: phase, borderColor: shade, backgroundColor: shade, borderWidth: 14, pointRadius: 0, showLine: true, spanGaps: false,
      data: rows.flatMap(({ w, y }) => segments(w.phases.filter((p) => p.phase === phase).map((p) => ({ ...p, label: `${w.name}: ${phase} ${(p.to - p.from).toFixed(2)}s` })), y)),
    }));
    const faults = (verdict.faults || []).filter((f) => f.cut_at);
    if (faults.length) {
      const row = (name) => Math.max(0, run.workers.findIndex((w) => w.name === name));
      datasets.push({
        label: "network fault", borderColor: "#b00000", borderWidth: 6, pointRadius: 0, showLine: true, spanGaps: false,
        data: faults.flatMap((f) => segments([{ from: f.cut_at, to: f.healed_at || f.cut_at, label: `${f.fault} (step ${f.step})` }], row(f.by || f.worker) - 0.3)),
      });
    }
    const markStyles = { epoch: ["triangle", "#111827"], checkpoint: ["rect", "#059669"], restart: ["star", "#b00000"], resumed: ["rectRot", "#9333ea"], failed: ["crossRot", "#b00000"], exit: ["line", "#111827"] };
    Object.entries(markStyles).forEach(([kind, [pointStyle, shade]]) => {
      const data = rows.flatMap(({ w, y }) => w.marks.filter((m) => m.kind === kind).map((m) => ({ x: since(m.t), y, label: `${w.name}: ${m.label} at ${since(m.t)}s` })));
      if (data.length) datasets.push({ label: kind, data, order: -1, pointStyle, pointRadius: 7, borderColor: shade, backgroundColor: shade, borderWidth: 2 });
    });
    canvas.parentElement.style.height = (110 + 46 * rows.length) + "px";
    // The legend's boxes filled, thin-edged: a bar's 14-pixel line would spill over its label.
    const legend = { labels: { boxWidth: 18, generateLabels: (made) => Chart.defaults.plugins.legend.labels.generateLabels(made).map((item) => ({ ...item, lineWidth: 1, fillStyle: item.strokeStyle })) } };
    new Chart(canvas, { type: "scatter", data: { datasets }, options: {
      plugins: { tooltip, legend },
      scales: {
        x: { title: { display: true, text: "seconds since the first container started" }, min: 0 },
        y: { reverse: true, min: -0.6, max: rows.length - 0.4, afterBuildTicks: (axis) => { axis.ticks = rows.map(({ y }) => ({ value: y })); }, ticks: { callback: (value) => (run.workers[value] || {}).name || "" } },
      },
    } });
    drawn += 1;
  }

  function workers() {
    const holder = document.getElementById("workers");
    const usage = verdict.usage || {};
    const walls = Object.values(usage).map((u) => u.wall_seconds).filter((s) => s > 0);
    const fastest = walls.length ? Math.min(...walls) : null;
    const outcome = Object.fromEntries((verdict.workers || []).map((w) => [w.name, w]));
    table(holder, ["worker", "status", "exit", "program wall s", "vs fastest", "CPU s", "busy", "peak memory MiB", "memory limit MiB", "CPU limit", "problem"],
      run.workers.map((w) => {
        const u = usage[w.name] || {};
        const c = w.container;
        return [w.name, (outcome[w.name] || {}).status, c.exit_code, u.wall_seconds,
          fastest && u.wall_seconds ? (u.wall_seconds / fastest).toFixed(2) + "x" : "",
          u.cpu_seconds, u.wall_seconds && u.cpu_limit ? Math.round((100 * u.cpu_seconds) / (u.wall_seconds * u.cpu_limit)) + "%" : "",
          u.peak_memory ? (u.peak_memory / 1048576).toFixed(0) : "", c.memory_limit ? (c.memory_limit / 1048576).toFixed(0) : "", u.cpu_limit || c.cpus || "",
          (outcome[w.name] || {}).problem || ""];
      }));
    if (verdict.straggler) note(holder, verdict.straggler);
  }

  // Each point the observer recorded a model state at, with how many variables each worker's held.
  function statesTable(holder, differing) {
    const points = [];
    run.workers.forEach((w) => w.states.forEach((s) => {
      const key = `${s.point} ${s.index}`;
      let row = points.find((p) => p.key === key);
      if (!row) { row = { key, point: s.point, index: s.index, step: s.step, counts: {} }; points.push(row); }
      row.counts[w.name] = s.variables;
    }));
    if (!points.length) return;
    holder.append(element("h3", "Model states recorded, by point"));
    const first = (p) => differing && p.point === differing.point && p.index === differing.index;
    table(holder, ["point", "step", ...run.workers.map((w) => `${w.name} variables`), "compared"],
      points.map((p) => [p.key, p.step, ...run.workers.map((w) => p.counts[w.name]), first(p) ? "first differs here" : (verdict.passed ? "identical" : "")]));
  }

  function proofs() {
    const holder = document.getElementById("proofs");
    const sync = verdict.synchronization || {};
    const data = verdict.data || {};
    const lines = (title, list) => { if (list && list.length) { holder.append(element("h3", title)); holder.append(element("pre", list.join("\n"))); } };
    lines("Model state", (sync.differences || []).length ? sync.differences : sync.proven);
    statesTable(holder, sync.first_differing);
    lines("Data", data.problems && data.problems.length ? data.problems : (data.proven ? [data.proven] : []));
    lines("Metrics that differ", verdict.differences);
    lines("Network", verdict.network);
    if ((verdict.faults || []).length) {
      holder.append(element("h3", "Network faults"));
      table(holder, ["fault", "by", "reached", "step", "epoch", "seconds"], verdict.faults.map((f) => [f.fault, f.by, f.reached, f.step, f.epoch, f.healed_at && f.cut_at ? (f.healed_at - f.cut_at).toFixed(1) : ""]));
    }
    if ((verdict.restarts || []).length) {
      holder.append(element("h3", "Restarts"));
      table(holder, ["reason", "resumed from step"], verdict.restarts.map((r) => [r.reason, r.resumed_from_step]));
    }
    if (!holder.children.length) note(holder, "The verdict proved nothing it could show here (no record, or nothing compared).");
  }

  [metrics, states, timeline, workers, proofs].forEach((part) => {
    try { part(); } catch (error) { fail(`${part.name}: ${error}`); }
  });
  body.dataset.charts = String(drawn);
})();
