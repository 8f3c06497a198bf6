// The /ui page: reads the service's JSON endpoints and draws four read-only views. No framework, no build.
"use strict";

const UNLIMITED = 1e18; // upstream's MaxInt64/5 stand-in for "no max" (1844674407370955161)
const SUFFIX = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };

function parseQuantity(q) {
  if (q === undefined || q === null) return null;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(q));
  if (!m) return null;
  return parseFloat(m[1]) * (SUFFIX[m[2]] || 1);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "style") node.style.cssText = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}

async function getJSON(path, init) {
  const resp = await fetch(path, init);
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status} ${body.message || ""}`);
  return body;
}

function bar(percent, threshold) {
  const over = threshold !== undefined && percent > threshold;
  const b = el("div", { class: "bar" },
    el("div", { class: "fill" + (over ? " over" : ""), style: `width:${Math.min(percent, 100)}%` }));
  if (threshold !== undefined) b.append(el("div", { class: "tick", style: `left:${Math.min(threshold, 100)}%` }));
  const title = `${percent}%` + (threshold !== undefined ? ` of allocatable (threshold ${threshold}%)` : "");
  return el("div", { class: "meter", title }, b, el("span", { class: "label" + (over ? " fail" : "") }, `${percent}%`));
}

function cellBar(node, resource) {
  if (!node.usagePercent || node.usagePercent[resource] === undefined) return el("td", { class: "muted" }, "no NodeMetric");
  return el("td", {}, bar(node.usagePercent[resource], node.usageThresholds[resource]));
}

function renderNodes(overview) {
  const load = (n) => Math.max(...Object.values(n.usagePercent || { none: -1 }));
  const nodes = [...overview.nodes].sort((a, b) => load(b) - load(a) || a.name.localeCompare(b.name));
  const table = el("table", {}, el("tr", {}, ...["node", "cpu", "memory", "thresholds", "pods"].map((h) => el("th", {}, h))));
  for (const n of nodes) {
    const hot = Object.entries(n.usagePercent || {}).some(([r, p]) => n.usageThresholds[r] !== undefined && p > n.usageThresholds[r]);
    const thresholds = Object.entries(n.usageThresholds).map(([r, t]) => `${r} ${t}%`).join(", ") || "none";
    table.append(el("tr", { class: hot ? "hot" : "", "data-node": n.name },
      el("td", { class: "name" }, n.name, hot ? " (over threshold)" : ""),
      cellBar(n, "cpu"), cellBar(n, "memory"),
      el("td", { class: "muted" }, thresholds), el("td", {}, n.pods)));
  }
  document.getElementById("nodes").replaceChildren(table);
}

function fmtList(rl, resources) {
  return resources.filter((r) => rl[r] !== undefined)
    .map((r) => `${r}: ${parseQuantity(rl[r]) >= UNLIMITED ? "unlimited" : rl[r]}`).join(", ") || "-";
}

function renderQuotas(tree) {
  const resources = ["cpu", "memory"];
  const table = el("table", { class: "tree" },
    el("tr", {}, ...["quota", "min", "runtime", "used", "max", "pods"].map((h) => el("th", {}, h))));
  const walk = (q, depth) => {
    table.append(el("tr", { "data-quota": q.name },
      el("td", { class: "name", style: `padding-left:${6 + depth * 18}px` }, (depth ? "└ " : "") + q.name),
      el("td", {}, fmtList(q.min, resources)), el("td", {}, fmtList(q.runtime, resources)),
      el("td", {}, fmtList(q.used, resources)), el("td", {}, fmtList(q.max, resources)), el("td", {}, q.pods)));
    for (const c of q.children) walk(c, depth + 1);
  };
  walk(tree.root, 0);
  for (const o of tree.orphans || []) walk(o, 1);
  document.getElementById("quotas").replaceChildren(table);
}

function renderGPUs(summaries) {
  const names = Object.keys(summaries).filter((n) => Object.keys(summaries[n].deviceTotalDetail.gpu || {}).length);
  if (!names.length) {
    document.getElementById("gpus").replaceChildren(el("p", { class: "muted" }, "No node reports GPUs (no Device objects)."));
    return;
  }
  const table = el("table", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "GPUs (share in use)")));
  for (const name of names) {
    const s = summaries[name];
    const total = s.deviceTotalDetail.gpu, used = (s.deviceUsedDetail || {}).gpu || {};
    const cells = Object.keys(total).map((minor) => {
      const share = (res) => {
        const t = parseQuantity(total[minor][res]), u = parseQuantity((used[minor] || {})[res]) || 0;
        return t ? Math.round((100 * u) / t) : 0;
      };
      return el("div", { class: "gpu" }, el("div", { class: "minor" }, `GPU ${minor}: core ${share("koordinator.sh/gpu-core")}%`),
        bar(share("koordinator.sh/gpu-core")),
        el("div", { class: "minor" }, `memory ${share("koordinator.sh/gpu-memory-ratio")}%`));
    });
    table.append(el("tr", {}, el("td", {}, name), el("td", {}, ...cells)));
  }
  document.getElementById("gpus").replaceChildren(table);
}

async function explain(p) {
  const box = document.getElementById("explain");
  box.replaceChildren(el("p", { class: "muted" }, `explaining ${p.namespace}/${p.name}…`));
  try {
    const answer = await getJSON("/apis/v1/explain", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ Pod: p.pod, Nodes: null, NodeNames: null }),
    });
    const rows = Object.entries(answer.nodes).sort(([a, x], [b, y]) =>
      (y.feasible - x.feasible) || ((y.total || 0) - (x.total || 0)) || a.localeCompare(b));
    const table = el("table", {}, el("tr", {}, ...["node", "feasible", "why not", "score"].map((h) => el("th", {}, h))));
    for (const [node, info] of rows) {
      const failed = Object.entries({ ...(info.kubeScheduler || {}), ...(info.filter || {}) })
        .filter(([, v]) => v.status !== "Success" && v.status !== "Skip").map(([k, v]) => `${k}: ${v.reason || v.status}`);
      table.append(el("tr", {}, el("td", {}, node),
        el("td", { class: info.feasible ? "pass" : "fail" }, info.feasible ? "yes" : "no"),
        el("td", {}, failed.join("; ") || "-"), el("td", {}, info.total ?? "-")));
    }
    box.replaceChildren(el("h3", {}, `Why pod ${answer.pod} goes where`), table);
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, String(err)));
  }
}

function renderPending(overview) {
  const pods = overview.pendingPods;
  if (!pods.length) {
    document.getElementById("pending").replaceChildren(el("p", { class: "muted" }, "No pending pod."));
    return;
  }
  const table = el("table", {}, el("tr", {}, ...["pod", "requests", ""].map((h) => el("th", {}, h))));
  for (const p of pods) {
    table.append(el("tr", {}, el("td", {}, `${p.namespace}/${p.name}`),
      el("td", {}, Object.entries(p.requests).map(([r, q]) => `${r}: ${q}`).join(", ") || "-"),
      el("td", {}, el("button", { onclick: () => explain(p) }, "explain"))));
  }
  document.getElementById("pending").replaceChildren(table);
}

async function section(id, path, render) {
  try {
    render(await getJSON(path));
  } catch (err) {
    document.getElementById(id).replaceChildren(el("p", { class: "error" }, String(err)));
  }
}

async function refresh() {
  const overview = getJSON("/apis/v1/overview");
  await Promise.all([
    overview.then((o) => { renderNodes(o); renderPending(o); })
      .catch((err) => document.getElementById("nodes").replaceChildren(el("p", { class: "error" }, String(err)))),
    section("quotas", "/apis/v1/plugins/ElasticQuota/tree", renderQuotas),
    section("gpus", "/apis/v1/plugins/DeviceShare/nodeDeviceSummaries", renderGPUs),
  ]);
  document.getElementById("status").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

refresh();
setInterval(refresh, 10000);
