// The Kueuestream dashboard: renders /dashboard/api/state and follows /dashboard/events.
// Every value is put in with textContent, never parsed as HTML.
"use strict";

let state = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (key === "class") node.className = value;
    else if (key === "style") node.setAttribute("style", value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  return node;
}

function workloadLink(ns, name) {
  const href = "#/workloads/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
  return el("a", { href, "data-workload": ns + "/" + name }, ns + "/" + name);
}

function time(ms) {
  return ms ? new Date(ms).toISOString().replace(".000Z", "Z") : "";
}

// --- overview ----------------------------------------------------------------------

function usageRow(cq, r) {
  const limit = r.borrowingLimitValue;
  const scale = Math.max(r.nominalValue + (limit === null ? 0 : limit), r.usedValue, r.nominalValue, 1e-9);
  const pct = (v) => (100 * v) / scale + "%";
  const bar = el("div", { class: "bar", title: r.used + " used of " + r.nominal + " nominal" });
  bar.append(el("div", { class: "used" + (r.usedValue > r.nominalValue ? " borrowing" : ""), style: "width:" + pct(r.usedValue) }));
  bar.append(el("div", { class: "nominal", style: "left:" + pct(r.nominalValue) }));
  const key = cq.name + "/" + r.flavor + "/" + r.resource;
  let text = r.used + "/" + r.nominal;
  const notes = [];
  if (r.borrowingLimit !== null) notes.push("borrowing limit " + r.borrowingLimit);
  if (r.lendingLimit !== null) notes.push("lending limit " + r.lendingLimit);
  return [
    el("span", {}, r.flavor + " " + r.resource),
    bar,
    el("span", {},
      el("span", { "data-usage": key }, text),
      notes.length ? el("span", { class: "meta" }, "(" + notes.join(", ") + ")") : null),
  ];
}

function cqCard(cq) {
  const share = cq.cohort === null ? "" : "weighted share " + cq.weightedShare + (cq.dominantResource ? " (" + cq.dominantResource + ")" : "");
  return el("div", { class: "cq", "data-cq": cq.name },
    el("div", { class: "title" }, "ClusterQueue " + cq.name,
      el("span", { class: "meta", "data-share": cq.name }, share),
      el("span", { class: "meta", "data-counts": cq.name },
        cq.pendingWorkloads + " pending, " + cq.reservingWorkloads + " reserving, " + cq.admittedWorkloads + " admitted"),
      cq.inactiveReason ? el("span", { class: "meta" }, "inactive: " + cq.inactiveReason) : null),
    el("div", { class: "usage" }, cq.resources.map((r) => usageRow(cq, r))));
}

function treeNode(node, cqs, cohorts) {
  if (node.kind === "ClusterQueue") return cqs[node.name] ? cqCard(cqs[node.name]) : null;
  const cohort = cohorts[node.name] || {};
  const share = cohort.parent ? "weighted share " + cohort.weightedShare + (cohort.dominantResource ? " (" + cohort.dominantResource + ")" : "") : "root Cohort";
  return el("div", { class: "cohort", "data-cohort": node.name },
    el("div", { class: "title" }, "Cohort " + node.name, el("span", { class: "meta", "data-share": "cohort/" + node.name }, share)),
    node.children.map((child) => treeNode(child, cqs, cohorts)));
}

function chart(data) {
  const box = el("div", {});
  const width = 640, height = 120, pad = 20;
  const buckets = data.buckets;
  const image = svg("svg", { width, height: height + pad, viewBox: "0 0 " + width + " " + (height + pad), role: "img" });
  const most = Math.max(1, ...buckets.map((b) => b.admitted + b.preempted + b.evicted));
  const w = buckets.length ? (width - 2 * pad) / buckets.length : 0;
  buckets.forEach((b, i) => {
    let y = height;
    for (const kind of ["admitted", "preempted", "evicted"]) {
      const h = (b[kind] / most) * (height - 10);
      if (h <= 0) continue;
      y -= h;
      const rect = svg("rect", { x: pad + i * w, y, width: Math.max(1, w - 1), height: h, class: kind });
      const tip = svg("title", {});
      tip.textContent = b[kind] + " " + kind;
      rect.append(tip);
      image.append(rect);
    }
  });
  const from = svg("text", { x: pad, y: height + 14 });
  from.textContent = time(data.fromMs);
  const to = svg("text", { x: width - pad, y: height + 14, "text-anchor": "end" });
  to.textContent = time(data.toMs);
  const top = svg("text", { x: 0, y: 10 });
  top.textContent = String(most);
  image.append(from, to, top);
  box.append(image);
  box.append(el("div", { class: "legend" },
    ["admitted", "preempted", "evicted"].map((k) => el("span", {}, el("span", { class: "sw " + k }), k + " " + state.totals[k]))));
  return box;
}

function pendingTable(cq) {
  const rows = cq.pending.map((w) => el("tr", { "data-pending": w.metadata.namespace + "/" + w.metadata.name },
    el("td", {}, String(w.positionInClusterQueue)), el("td", {}, workloadLink(w.metadata.namespace, w.metadata.name)),
    el("td", {}, String(w.priority)), el("td", {}, w.localQueueName + " #" + w.positionInLocalQueue),
    el("td", {}, w.reason), el("td", {}, w.message)));
  const all = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/" + encodeURIComponent(cq.name) + "/pendingworkloads";
  const more = cq.pendingQueued > cq.pendingShown
    ? el("p", { class: "meta" }, "first " + cq.pendingShown + " of " + cq.pendingQueued + " queued: ", el("a", { href: all }, "all of them"))
    : null;
  const header = ["#", "workload", "priority", "local queue", "reason", "message"].map((h) => el("th", {}, h));
  return el("div", { "data-pending-cq": cq.name },
    el("h3", {}, "ClusterQueue " + cq.name + " (" + cq.pendingWorkloads + " pending)"),
    cq.pending.length ? el("table", {}, el("thead", {}, el("tr", {}, header)), el("tbody", {}, rows)) : el("p", { class: "meta" }, "none"),
    more);
}

function renderOverview() {
  const cqs = Object.fromEntries(state.clusterQueues.map((c) => [c.name, c]));
  const cohorts = Object.fromEntries(state.cohorts.map((c) => [c.name, c]));
  document.getElementById("tree").replaceChildren(...state.roots.map((r) => treeNode(r, cqs, cohorts)).filter(Boolean));
  document.getElementById("chart").replaceChildren(chart(state.chart));
  document.getElementById("recent").replaceChildren(...state.recent.map((h) =>
    el("li", { "data-recent": h.kind + " " + h.namespace + "/" + h.name }, time(h.timeMs) + " " + h.kind + " ", workloadLink(h.namespace, h.name),
      h.clusterQueue ? " in " + h.clusterQueue : "", h.reason ? " (" + h.reason + ")" : "")));
  const waiting = state.clusterQueues.filter((cq) => cq.pendingWorkloads > 0 || cq.pending.length > 0);
  const idle = state.clusterQueues.filter((cq) => !waiting.includes(cq)).map((cq) => cq.name);
  document.getElementById("pending").replaceChildren(...waiting.map(pendingTable),
    idle.length ? el("p", { class: "meta", "data-no-pending": idle.join(" ") }, "nothing pending in " + idle.join(", ")) : null);
}

function render() {
  if (!state) return;
  document.getElementById("source").textContent = state.source;
  document.getElementById("clock").textContent = time(state.nowMs);
  document.body.dataset.version = state.version;
  const error = document.getElementById("error");
  error.hidden = !state.error;
  error.textContent = state.error;
  renderOverview();
}

// --- one Workload --------------------------------------------------------------------

function shortText(s) {
  const where = s.level + (s.levelName ? " " + s.levelName : "");
  return (s.podSet ? s.podSet + ": " : "") + s.resource + (s.flavor ? " in " + s.flavor : "") + " short by " + s.short +
    " at " + where + " (requested " + s.requested + ", available " + s.available + " of " + s.capacity + ")";
}

function details(entry) {
  const out = [];
  if (entry.cycles) out.push(el("div", {}, "cycles " + entry.cycles.from + (entry.cycles.to !== entry.cycles.from ? "–" + entry.cycles.to : "")));
  for (const s of entry.short || []) out.push(el("div", { "data-short": s.resource }, shortText(s)));
  for (const [key, value] of Object.entries(entry)) {
    if (["event", "reason", "message", "time", "cycles", "short", "trace"].includes(key) || value === null) continue;
    out.push(el("div", {}, key + ": " + (typeof value === "object" ? JSON.stringify(value) : String(value))));
  }
  if (entry.trace) out.push(el("details", {}, el("summary", {}, "decision trace"), el("pre", {}, JSON.stringify(entry.trace, null, 2))));
  return out;
}

function wouldAdmit(would) {
  if (!would) return [el("p", { class: "meta" }, "nothing: it is not waiting for quota")];
  const out = [];
  for (const q of would.quotaIncrease || []) {
    const amounts = Object.entries(q.resources).map(([r, v]) => r + " +" + v).join(", ");
    out.push(el("li", { "data-would": "quota" }, "raise the nominal quota of ClusterQueue " + q.clusterQueue + " in flavor " + q.flavor + " by " + amounts));
  }
  if (would.note) out.push(el("li", { "data-would": "note" }, would.note));
  if ((would.finishing || []).length) {
    out.push(el("li", { "data-would": "finishing" }, "or wait for these to finish: ", would.finishing.flatMap((w, i) => {
      const [ns, name] = w.split("/");
      return i ? [", ", workloadLink(ns, name)] : [workloadLink(ns, name)];
    })));
  }
  return [el("ul", {}, out), el("details", {}, el("summary", {}, "JSON"), el("pre", {}, JSON.stringify(would, null, 2)))];
}

async function showWorkload(ns, name) {
  document.getElementById("workload-name").textContent = "Workload " + ns + "/" + name;
  const problem = document.getElementById("workload-error");
  const body = document.querySelector("#timeline tbody");
  const would = document.getElementById("would-admit");
  const answer = await fetch("/dashboard/api/workloads/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name));
  const data = await answer.json();
  if (!answer.ok) {
    problem.hidden = false;
    const closest = (data.closest || []).flatMap((w, i) => {
      const [cns, cname] = w.split("/");
      return [i ? ", " : " Did you mean ", workloadLink(cns, cname)];
    });
    problem.replaceChildren(data.error, ...closest);
    body.replaceChildren();
    would.replaceChildren();
    return;
  }
  problem.hidden = true;
  body.replaceChildren(...(data.timeline || []).map((entry) => el("tr", { "data-event": entry.event },
    el("td", {}, entry.time || ""), el("td", {}, String(entry.event)), el("td", {}, String(entry.reason || "")),
    el("td", {}, String(entry.message || "")), el("td", {}, details(entry)))));
  would.replaceChildren(...wouldAdmit(data.wouldAdmit));
  document.getElementById("workload").dataset.loaded = ns + "/" + name;
}

// A timeline is read from the whole log: while one is being read, later updates wait for it
// and then ask once more, at most every two seconds.
let reading = false;
let readAgain = false;

async function refreshWorkload() {
  if (reading) {
    readAgain = true;
    return;
  }
  reading = true;
  try {
    await route();
  } finally {
    reading = false;
    if (readAgain) {
      readAgain = false;
      setTimeout(refreshWorkload, 2000);
    }
  }
}

function route() {
  const match = location.hash.match(/^#\/workloads\/([^/]+)\/([^/]+)$/);
  document.getElementById("overview").hidden = !!match;
  document.getElementById("workload").hidden = !match;
  return match ? showWorkload(decodeURIComponent(match[1]), decodeURIComponent(match[2])) : Promise.resolve();
}

// --- live updates ----------------------------------------------------------------------

function connect() {
  const live = document.getElementById("live");
  const source = new EventSource("/dashboard/events");
  source.addEventListener("state", (event) => {
    state = JSON.parse(event.data);
    live.textContent = "live";
    live.className = "live";
    render();
    if (!document.getElementById("workload").hidden) refreshWorkload();
  });
  source.onerror = () => {
    live.textContent = "reconnecting";
    live.className = "live off";
  };
}

document.getElementById("find").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("find-name");
  const [ns, name] = input.value.trim().split("/");
  if (ns && name) {
    location.hash = "#/workloads/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
    input.value = "";
  }
});
window.addEventListener("hashchange", route);
fetch("/dashboard/api/state").then((r) => r.json()).then((s) => { if (!state) { state = s; render(); } });
route();
connect();
