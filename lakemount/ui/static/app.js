// lakemount web UI: a client of /api/v1. Every value from the server is inserted
// as text (el() makes text nodes and attributes, never parsed markup), so object names,
// commit messages and previews cannot inject markup. State changes send the CSRF
// header (double-submit of the lakemount_csrf cookie).
"use strict";

const API = "/api/v1";
const PAGE = 100;
const TABLE_POINTER = "_iceberg_table.json";  // an Iceberg table's pointer object in its directory (lakemount/tables.py)

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "onsubmit" || (k === "onclick" && tag === "button")) e.addEventListener(k.slice(2), action(v));
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  // A field named only by its placeholder gets it as its accessible name too (the placeholder is gone once typed in).
  if ((tag === "input" || tag === "textarea") && attrs && attrs.placeholder && !attrs["aria-label"]) e.setAttribute("aria-label", attrs.placeholder);
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return v.join("=");
  }
  return "";
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, query, body) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v === undefined || v === null || v === "") continue;
    for (const one of Array.isArray(v) ? v : [v]) qs.append(k, one);
  }
  const headers = {};
  if (method !== "GET" && method !== "HEAD") headers["X-Lakemount-CSRF"] = cookie("lakemount_csrf");
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const url = API + path + (qs.toString() ? "?" + qs : "");
  const r = await fetch(url, {method, headers, credentials: "same-origin",
                              body: body === undefined ? undefined : JSON.stringify(body)});
  if (r.status === 401 && path !== "/auth/login") { location.assign("/login" + location.hash); throw new ApiError(401, "not logged in"); }
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = {message: text.slice(0, 300)}; }
  if (!r.ok) throw new ApiError(r.status, (data && data.message) || ("HTTP " + r.status));
  return data;
}

// Feedback while requests run: the main region is aria-busy at once, and the #busy live region says
// "Loading…" once BUSY_DELAY ms have passed (a quick page does not flicker). Counted, so overlapping work
// (a page load and an action) clears it only when the last one ends.
const BUSY_DELAY = 150;
let busyCount = 0;
let busyTimer = null;
async function busy(fn) {
  if (busyCount++ === 0) {
    main().setAttribute("aria-busy", "true");
    busyTimer = setTimeout(() => { document.getElementById("busy").textContent = "Loading…"; }, BUSY_DELAY);
  }
  try { return await fn(); } finally {
    if (--busyCount === 0) {
      clearTimeout(busyTimer);
      main().removeAttribute("aria-busy");
      document.getElementById("busy").textContent = "";
    }
  }
}

// A form's submit or a button's click runs one request at a time: its buttons are disabled until the action
// ends (a double click merged or committed twice), and the page shows it is busy. A form's default submit
// (a reload of the page) is always prevented, also for the submit ignored while the first one runs.
function action(handler) {
  return async ev => {
    const node = ev.currentTarget;  // read now: null once the event has been dispatched
    if (node.tagName === "FORM") ev.preventDefault();
    if (node.dataset.running) return;
    const buttons = node.tagName === "FORM" ? [...node.querySelectorAll("button")] : [node];
    const had = document.activeElement;  // disabling a focused button drops its focus: given back at the end
    node.dataset.running = "1";
    focusAfter = had && buttons.includes(had) ? had.id : "";
    for (const b of buttons) b.disabled = true;
    try { await busy(() => handler(ev)); } finally {
      delete node.dataset.running;
      for (const b of buttons) b.disabled = false;
      focusAfter = "";
      if (buttons.includes(had) && had.isConnected && document.activeElement === document.body) had.focus({preventScroll: true});
    }
  };
}

// URI escaping that never throws: the API sends paths as well-formed text (a key stored before the server
// refused non-UTF-8 names comes printable, "bad\\xffname"), but a lone surrogate from anywhere else must
// cost one odd name, never the whole page ("URI malformed"). A hand-typed malformed %-escape in the address
// is told as such, not as "URI malformed".
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
function enc(s) {
  s = String(s);
  try { return encodeURIComponent(s); } catch (e) { return encodeURIComponent(s.replace(LONE_SURROGATE, "\uFFFD")); }
}
function dec(s) {
  try { return decodeURIComponent(s); } catch (e) { throw new Error(`the address holds a malformed %-escape: ${s}`); }
}
const main = () => document.getElementById("main");
// A redraw keeps the keyboard's place: the element focused before (a field being typed in, the button just
// used) is focused again in the new page when it has the same id, with its caret; else focus goes to main,
// so the next Tab is in the page, not back at the header (a keyboard user started over after every action).
function show(...nodes) {
  const had = document.activeElement;
  const id = had && had !== document.body ? had.id : focusAfter;
  const caret = had && typeof had.selectionStart === "number" ? [had.selectionStart, had.selectionEnd] : null;
  main().replaceChildren(el("div", {class: "page"}, ...nodes));
  const again = id ? document.getElementById(id) : null;
  if (again && main().contains(again) && !again.disabled) {
    again.focus({preventScroll: true});
    if (caret && typeof again.selectionStart === "number") again.setSelectionRange(...caret);
  } else if (focusAfter || (again && again.disabled) || (had && had !== document.body && !had.isConnected)) {
    // (a control drawn disabled again, as the author's approve is, cannot hold the focus: main keeps the place)
    main().focus({preventScroll: true});
  }
}
let focusAfter = "";  // the id of the control whose action is running (disabled, so it lost the focus)
// A page's slow load (or a live re-render) that finishes after the user moved on must not draw over the new page.
function draw(g, ...nodes) { if (g === gen) show(...nodes); }
// What went wrong (the server's message) and, from live.js, what to do about it.
function errorBox(e) {
  const hint = errorHint(e);
  return el("p", {class: "error", role: "alert"}, String(e && e.message || e), hint ? el("span", {class: "hint"}, " ", hint) : null);
}
function fmtSize(n) {
  if (n === undefined || n === null) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; let x = n;
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return (i ? x.toFixed(1) : x) + " " + u[i];
}
// One date format everywhere: relative ("3 min ago") with the exact UTC time (ISO 8601) as the tooltip. The API
// gives seconds since the epoch (commits, objects) or ISO text (pull requests, hook runs): both are taken.
function fmtTime(t) {
  if (t === undefined || t === null || t === "" || t === 0) return "";
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  if (isNaN(d.getTime())) return String(t);
  const iso = d.toISOString();
  return el("time", {datetime: iso, title: iso}, relTime(d));
}
function relTime(d) {
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  const ahead = s < 0, a = Math.abs(s);
  const say = (n, unit) => ahead ? `in ${n} ${unit}` : `${n} ${unit} ago`;
  if (a < 45) return "just now";
  if (a < 3600) return say(Math.max(1, Math.round(a / 60)), "min");
  if (a < 86400) return say(Math.round(a / 3600), "h");
  if (a < 86400 * 30) return say(Math.round(a / 86400), Math.round(a / 86400) === 1 ? "day" : "days");
  if (a < 86400 * 365) return say(Math.round(a / (86400 * 30)), Math.round(a / (86400 * 30)) === 1 ? "month" : "months");
  return say(Math.round(a / (86400 * 365)), Math.round(a / (86400 * 365)) === 1 ? "year" : "years");
}
function link(hash, ...text) { return el("a", {href: "#" + hash}, ...text); }
function route(...parts) { return "/" + parts.map(p => enc(p)).join("/"); }

let me = null;

// ---- login ---------------------------------------------------------------------
function loginPage() {
  document.getElementById("nav").replaceChildren();
  document.getElementById("who").replaceChildren();
  const msg = el("div");
  const id = el("input", {id: "access_key_id", name: "access_key_id", autocomplete: "username", required: true});
  const secret = el("input", {id: "secret_access_key", name: "secret_access_key", type: "password",
                              autocomplete: "current-password", required: true});
  const form = el("form", {class: "login", id: "login-form", onsubmit: async ev => {
    ev.preventDefault();
    msg.replaceChildren();
    try {
      await api("POST", "/auth/login", {}, {access_key_id: id.value.trim(), secret_access_key: secret.value});
      location.assign("/" + (location.hash || "#/"));  // back to the page that asked for the login
    } catch (e) { msg.replaceChildren(errorBox(e.status === 401 ? "wrong access key or secret" : e)); }
  }},
    el("h2", {}, "Log in to lakemount"),
    el("label", {for: "access_key_id"}, "Access key ID"), id,
    el("label", {for: "secret_access_key"}, "Secret access key"), secret,
    el("button", {type: "submit", id: "login"}, "Log in"), msg);
  show(form);
}

async function logout() {
  try { await api("POST", "/auth/logout"); } finally { location.assign("/login"); }
}

// ---- repositories --------------------------------------------------------------
async function reposPage(q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  const data = await api("GET", "/repositories", {after, amount: PAGE});
  const rows = data.results.map(r => el("tr", {},
    el("td", {}, link(route("r", r.id, "tree", r.default_branch), r.id)),
    el("td", {}, r.default_branch), el("td", {}, r.storage_namespace), el("td", {}, fmtTime(r.creation_date)),
    el("td", {}, el("button", {class: "delete-repo", onclick: async () => {
      if (!confirm("Delete repository " + r.id + "?")) return;
      try { await api("DELETE", "/repositories/" + enc(r.id)); render(); } catch (e) { main().prepend(errorBox(e)); }
    }}, "delete"))));
  const name = el("input", {name: "name", placeholder: "name", required: true});
  // Left empty, the namespace is the storage config's default_namespace_prefix + "/" + name, as lakeFS's form fills it.
  const ns = el("input", {name: "storage_namespace", placeholder: "storage namespace (default: under the server's store)", size: 40});
  api("GET", "/config/storage").then(c => {
    if (c.default_namespace_prefix) ns.placeholder = "storage namespace (default: " + c.default_namespace_prefix + "/<name>)";
  }).catch(() => {});
  const branch = el("input", {name: "default_branch", value: "main", size: 10, "aria-label": "default branch"});
  const samples = el("input", {type: "checkbox", name: "sample_data"});
  const msg = el("div");
  const create = el("form", {class: "inline", id: "create-repo", onsubmit: async ev => {
    ev.preventDefault();
    try {
      await api("POST", "/repositories", {}, {name: name.value.trim(), storage_namespace: ns.value.trim(),
                                                default_branch: branch.value.trim() || "main", sample_data: samples.checked});
      render();
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  }}, "New repository: ", name, ns, branch, el("label", {}, samples, " sample data"), el("button", {type: "submit"}, "create"));
  draw(g0, el("h2", {}, "Repositories"), create, msg,
    rows.length ? el("table", {id: "repos"}, el("tr", {}, el("th", {}, "repository"), el("th", {}, "default branch"),
      el("th", {}, "storage namespace"), el("th", {}, "created"), el("th", {}, "")), rows)
      : el("p", {class: "muted"}, "No repositories yet."),
    pager(data, after, "/", q));
  // Each repository's delete button, once its rights are known (after the list is drawn: one request per row
  // must not hold up the first page).
  data.results.forEach((r, i) => rights(r.id).then(can => {
    if (g0 === gen) mayNot(rows[i].querySelector(".delete-repo"), can, "DeleteRepo");
  }).catch(() => {}));
}

// Forward paging with a stack of previous offsets in the URL (?after=..&back=..).
function pager(data, after, base, q, extra) {
  const back = q.getAll("back");
  const mk = (a, b) => {
    const p = new URLSearchParams(Object.entries(extra || {}).filter(([, v]) => v !== undefined && v !== ""));
    if (a) p.set("after", a);
    for (const x of b) p.append("back", x);
    const s = p.toString();
    return "#" + base + (s ? "?" + s : "");
  };
  const prev = after ? el("a", {href: mk(back[back.length - 1] || "", back.slice(0, -1)), class: "prev"}, "← previous") : null;
  const next = data.pagination.has_more ? el("a", {href: mk(data.pagination.next_offset, after ? [...back, after] : back), class: "next"}, "next →") : null;
  return el("div", {class: "pager"}, prev, el("span", {class: "muted"}, data.pagination.results + " shown"), next);
}

// ---- ref picker ----------------------------------------------------------------
async function refPicker(repo, ref, go, id = "ref-picker") {
  const sel = el("select", {id, "aria-label": "ref", onchange: () => go(sel.value)});
  const seen = new Set();
  const add = (group, items) => {
    const g = el("optgroup", {label: group});
    for (const it of items) { seen.add(it.id); g.appendChild(el("option", {value: it.id, selected: it.id === ref}, it.id)); }
    if (items.length) sel.appendChild(g);
  };
  try {
    const [b, t] = await Promise.all([api("GET", route("repositories", repo, "branches"), {amount: 1000}),
                                     api("GET", route("repositories", repo, "tags"), {amount: 1000})]);
    add("branches", b.results); add("tags", t.results);
  } catch (e) { /* the page shows its own error */ }
  if (!seen.has(ref)) sel.appendChild(el("option", {value: ref, selected: true}, ref));
  const commit = el("input", {placeholder: "commit id", size: 14, id: "ref-commit"});
  const form = el("form", {class: "inline", onsubmit: ev => { ev.preventDefault(); if (commit.value.trim()) go(commit.value.trim()); }},
    commit, el("button", {type: "submit"}, "go"));
  return el("span", {class: "picker"}, "ref: ", sel, " or ", form);
}

// The breadcrumb of every page of a ref: repo / ref (the picker) / dir / ... / file. Each directory links to its
// listing; empty segments are kept ("a//b" is in "a/" then "a//"), as the listing's prefixes are. ``go(ref)``
// is where the picker leads: the same page at another ref.
async function breadcrumb(repo, ref, path, go) {
  const nav = el("nav", {class: "crumbs", id: "breadcrumb", "aria-label": "breadcrumb"},
    link(route("r", repo, "tree", ref), repo), " / ", await refPicker(repo, ref, go));
  const segments = (path || "").split("/");
  const file = segments.pop();  // "" for a directory (path ends with "/") or the root
  let acc = "";
  for (const part of segments) {
    acc += part + "/";
    nav.append(" / ", el("a", {href: "#" + treeHash(repo, ref, acc), class: "dir"}, part || "(empty)"));
  }
  if (file) nav.append(" / ", el("strong", {class: "file"}, file));
  return nav;
}

// The breadcrumb of a repository-wide page (pull requests, feed, hook runs, settings): its picker leads to the
// objects of the picked ref.
function repoCrumb(repo, ref) { return breadcrumb(repo, ref, "", r => location.assign("#" + route("r", repo, "tree", r))); }

// The repository's default branch: the ref of the tabs on its repository-wide pages (pulls, feed, hook runs, settings).
async function defaultBranch(repo) { return (await api("GET", route("repositories", repo))).default_branch; }

// What the user may do in a repository, as the server decides it (getRepositoryPermissions: ReadRepo, WriteRepo,
// DeleteRepo). A control the user may not use is disabled with the reason as its tooltip, instead of a button
// whose click ends in "insufficient permissions". Unknown (the request failed): every control stays enabled,
// and the server still refuses what it refuses.
async function rights(repo) {
  try { return (await api("GET", route("repositories", repo, "permissions"))).actions; }
  catch (e) { if (e.status === 401) throw e; return null; }
}
function mayNot(node, can, action) {
  if (!can || can[action] !== false) return node;
  const why = "You may not do this: it needs " + action + " on this repository";
  node.classList.add("no-rights");
  node.setAttribute("title", why);
  node.dataset.needs = action;
  for (const c of node.matches("button, input, select, textarea") ? [node] : node.querySelectorAll("button, input, select, textarea")) {
    c.disabled = true;
    c.setAttribute("title", why);
  }
  return node;
}

// The author may not approve their own pull request (the server refuses it): the button says so, disabled,
// instead of answering a click with "authors cannot approve their own pull request".
function ownPull(button, p) {
  if (!me || me.id !== p.author) return button;
  const why = "Authors cannot approve their own pull request: another user approves it";
  button.disabled = true;
  button.setAttribute("title", why);
  button.dataset.needs = "another user";
  button.classList.add("no-rights");
  return button;
}

function repoTabs(repo, ref) {
  return el("div", {class: "tabs"},
    link(route("r", repo, "tree", ref), "objects"), link(route("r", repo, "tables", ref), "tables"), link(route("r", repo, "commits", ref), "commits"),
    link(route("r", repo, "refs", ref), "branches & tags"), link(route("r", repo, "changes", ref), "uncommitted"),
    link(route("r", repo, "compare", ref, ref), "compare"), link(route("r", repo, "pulls"), "pull requests"),
    link(route("r", repo, "actions"), "hook runs"), link(route("r", repo, "feed"), "live feed"),
    link(route("r", repo, "audit"), "audit"), link(route("r", repo, "settings"), "protection & GC"));
}

// ---- object browser ------------------------------------------------------------
async function treePage(repo, ref, prefix, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  const t0 = performance.now();
  const [data, picker] = await Promise.all([
    api("GET", route("repositories", repo, "refs", ref, "objects", "ls"), {...listingQuery(prefix, q), after, amount: PAGE, user_metadata: "false"}),
    breadcrumb(repo, ref, prefix, r => location.assign("#" + route("r", repo, "tree", r) + "/" + prefix.split("/").map(enc).join("/")))]);
  const writing = await branchWriting(repo, ref);  // null on a tag or commit: no upload, delete, commit there
  // The directory's own entry (an empty directory kept by the mount, path == prefix) is not a row without a name.
  const blames = [];  // the "last change" cells, filled by one request once the page is drawn (diff.js)
  const blameCell = path => { const td = el("td", {class: "last-change", "data-path": path}, el("span", {class: "muted"}, "…")); blames.push({path, td}); return td; };
  const rows = data.results.filter(o => o.path !== prefix).map(o => {
    const name = o.path.slice(prefix.length);
    if (o.path_type === "common_prefix") {
      return el("tr", {class: "dir"}, el("td", {}, link(treeHash(repo, ref, o.path), name)), el("td", {}), el("td", {}), blameCell(o.path), el("td", {}));
    }
    return el("tr", {class: "obj"}, el("td", {}, link(objHash(repo, ref, o.path), name)),
      el("td", {}, fmtSize(o.size_bytes)), el("td", {}, fmtTime(o.mtime)), blameCell(o.path),
      el("td", {}, link(route("r", repo, "history", ref) + "?path=" + enc(o.path), "history"),
        writing ? [" ", writing.deleteButton(o.path)] : null));
  });
  // An Iceberg table is a directory holding its pointer object (lakemount/tables.py TABLE_POINTER): its page links to
  // the table's page (tables.js) and to its history in the audit trail (its commits, schema changes, creation, by
  // whom), as an object's page does.
  const isTable = prefix && data.results.some(o => o.path === prefix + TABLE_POINTER);
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), picker,
    isTable ? el("p", {id: "table-info"}, "Iceberg table ", el("strong", {}, prefix.slice(0, -1).split("/").join(".")), " · ",
                 el("a", {id: "table-page", href: "#" + tableHash(repo, ref, prefix)}, "schema, snapshots and rows"), " · ",
                 auditLink(repo, prefix, "table history: who changed it (audit)", "table-audit")) : null,
    writing ? [writing.uploadBox(prefix), importButton(repo, ref, prefix)] : null,
    listingFilter(q),
    el("table", {id: "listing", "data-ms": Math.round(performance.now() - t0)},
      el("tr", {}, el("th", {}, "name"), el("th", {}, "size"), el("th", {}, "modified"), el("th", {}, "last change"), el("th", {}, el("span", {class: "sr-only"}, "actions"))), rows),
    rows.length ? null : listingEmpty(q),
    pager(data, after, route("r", repo, "tree", ref) + (prefix ? "/" + prefix.split("/").map(enc).join("/") : ""), q,
      {name: q.get("name") || undefined, deep: q.get("deep") || undefined}));
  if (g0 === gen) fillBlame(repo, ref, blames).catch(() => {});  // not awaited: the page is usable while a long history is walked
}
// The listing prefix of a tree route's segments, empty ones kept (the path "a//b" is in directory "a//",
// "/x" in "/"); a typed route without the trailing slash still names a directory.
function treePrefix(segments) {
  const p = segments.join("/");
  return p && !p.endsWith("/") ? p + "/" : p;
}
function treeHash(repo, ref, prefix) { return route("r", repo, "tree", ref) + "/" + prefix.split("/").map(enc).join("/"); }
function objHash(repo, ref, path) { return route("r", repo, "object", ref) + "?path=" + enc(path); }

function table(schema, rows) {
  return el("table", {class: "preview-table"},
    el("tr", {}, schema.map(c => el("th", {}, c.name, c.type && c.type !== "string" ? el("div", {class: "muted"}, c.type) : null))),
    rows.map(r => el("tr", {}, r.map(v => el("td", {}, v === null ? "null" : typeof v === "object" ? JSON.stringify(v) : v)))));
}

async function objectPage(repo, ref, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const path = q.get("path") || "";
  const [stat, p, crumbs] = await Promise.all([
    api("GET", route("repositories", repo, "refs", ref, "objects", "stat"), {path}),
    api("GET", route("repositories", repo, "refs", ref, "objects", "preview"), {path, rows: 100}),
    breadcrumb(repo, ref, path, r => location.assign("#" + objHash(repo, r, path)))]);
  const dataUrl = API + route("repositories", repo, "refs", ref, "objects") + "?path=" + enc(path);
  const lastChange = el("span", {id: "object-blame"}, el("span", {class: "muted"}, "…"));
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/") + 1) : "";
  let body;
  switch (p.kind) {
    case "parquet":
      body = el("div", {id: "preview", "data-kind": "parquet"},
        el("h3", {}, "Schema"), el("table", {class: "schema"}, el("tr", {}, el("th", {}, "column"), el("th", {}, "type")),
          p.schema.map(c => el("tr", {}, el("td", {}, c.name), el("td", {}, c.type)))),
        el("h3", {}, "Rows ", el("span", {class: "muted"}, `(first ${p.rows.length} of ${p.num_rows})`)), table(p.schema, p.rows),
        p.message ? el("p", {class: "muted"}, p.message) : null);
      break;
    case "csv":
      body = el("div", {id: "preview", "data-kind": "csv"}, table(p.schema, p.rows), p.truncated ? el("p", {class: "muted"}, "first rows only") : null);
      break;
    case "json": case "text":
      body = el("div", {id: "preview", "data-kind": p.kind}, el("pre", {}, p.text), p.truncated ? el("p", {class: "muted"}, "truncated: the first 256 KiB") : null);
      break;
    case "image":
      body = el("div", {id: "preview", "data-kind": "image"}, el("img", {class: "preview", src: dataUrl, alt: path}));
      break;
    case "binary":
      body = el("p", {id: "preview", "data-kind": "binary", class: "muted"}, "Binary file: no preview. Download it instead.");
      break;
    case "too_large":
      body = el("p", {id: "preview", "data-kind": "too_large", class: "muted"}, "Too large to preview (" + fmtSize(p.size_bytes) + ").");
      break;
    default:
      body = el("p", {id: "preview", "data-kind": "error", class: "error"}, p.message || "no preview");
  }
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), crumbs,
    el("div", {}, el("a", {href: "#" + treeHash(repo, ref, dir), id: "up"}, "← " + (dir || "/")), " ", el("strong", {id: "object-path"}, path)),
    el("p", {}, fmtSize(stat.size_bytes), " · ", stat.content_type || "", " · ", fmtTime(stat.mtime), " · ",
      el("a", {href: dataUrl, download: path.split("/").pop()}, "download"), " · ",
      link(route("r", repo, "history", ref) + "?path=" + enc(path), "history"), " · ",
      auditLink(repo, path, "who read / changed this", "object-audit")),
    el("p", {}, "last change: ", lastChange),
    body, await whoTouched(repo, path));
  if (g0 === gen) fillBlame(repo, ref, [{path, td: lastChange}]).catch(() => {});
}

// ---- audit trail ------------------------------------------------------------------
// Paths and user names are shown as stored, with control characters escaped (\xNN), as the CLI shows them:
// a name holding a newline or a terminal escape reads as what it is.
function shown(s) {
  return String(s).replace(/[\\\u0000-\u001f\u007f-\u009f\u2028\u2029]/g,
    c => c === "\\" ? "\\\\" : "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0").slice(-4));
}
// One line per record at 1,280 px (issue 38): no cell wraps; a long user, ref, path or client is cut with an
// ellipsis (style.css) and shown whole as the cell's tooltip.
function cut(cls, text) { return el("td", {class: cls, title: text}, text); }
function auditRows(results) {
  return results.map(r => el("tr", {class: "audit", "data-id": r.id}, el("td", {class: "time"}, r.time.replace("T", " ").slice(0, 23)),
    cut("user", shown(r.user)), el("td", {}, r.frontend), el("td", {class: "op"}, r.op), el("td", {}, String(r.status)),
    el("td", {}, fmtSize(r.bytes)), cut("ref", shown(r.ref) + (r.commit ? "@" + r.commit.slice(0, 12) : "")),
    cut("path", shown(r.path)), cut("client muted", r.pid >= 0 ? shown(r.process) + " pid " + r.pid : shown(r.client || ""))));
}
function auditTable(results, id) {
  const heads = [["time", "time (UTC)"], ["user", "user"], ["via", "via"], ["op", "operation"], ["status", "status"], ["bytes", "bytes"],
                 ["ref", "ref"], ["path", "path"], ["client", "client"]];
  return el("table", {id, class: "audit-table"}, el("tr", {}, heads.map(([c, h]) => el("th", {class: c}, h))), auditRows(results));
}
// The last reads and changes of one object on its page; nothing (not an error) for a user without AuditRead.
async function whoTouched(repo, path) {
  try {
    const d = await api("GET", route("repositories", repo, "audit"), {path, order: "desc", amount: 1000});
    const mine = d.results.filter(r => r.path === path).slice(0, 20);
    return el("div", {id: "who-touched"}, el("h3", {}, "Who read / changed this ", el("span", {class: "muted"}, "(newest first)")),
      mine.length ? auditTable(mine, "who-touched-table") : el("p", {class: "muted"}, "no audit records yet"));
  } catch (e) {
    return null;
  }
}
// The audit page of a path (an object, a table's directory): the trail filtered to it.
function auditLink(repo, path, text, id) { return el("a", {id, href: "#" + route("r", repo, "audit") + "?path=" + enc(path)}, text); }
// A from/to field's value (datetime-local, read as UTC) in seconds since the epoch; "to" covers its whole minute.
function utcSeconds(value, end) {
  if (!value) return undefined;
  const t = Date.parse(value + (value.length === 16 ? ":00" : "") + "Z");
  if (isNaN(t)) throw new Error(`not a time: ${value}`);
  return Math.floor(t / 1000) + (end && value.length === 16 ? 59 : 0);
}
const AUDIT_FIELDS = ["ref", "path", "user", "op", "from", "to"];
// The operation filter's choices come from the server's list of what the trail records (listAuditOperations,
// lakemount/audit/operations.py): every write at once, every read, or one operation, grouped by front end.
function operationSelect(ops, chosen) {
  const opt = (value, label, title) => el("option", {value, selected: value === chosen, title}, label);
  const kinds = [["kind:write", "every write"], ["kind:read", "every read"], ["kind:other", "reviews and hook runs"]];
  const groups = new Map();
  for (const o of ops) { if (!groups.has(o.frontend)) groups.set(o.frontend, []); groups.get(o.frontend).push(o); }
  const sel = el("select", {id: "audit-op", name: "op", "aria-label": "operation"}, opt("", "every operation"),
    el("optgroup", {label: "by kind"}, kinds.map(([v, l]) => opt(v, l))),
    [...groups].map(([front, list]) => el("optgroup", {label: front},
      list.map(o => opt(o.name, o.name + (o.kind === "write" ? " (write)" : ""), o.summary)))));
  if (chosen && !sel.querySelector("option:checked")?.value) sel.appendChild(opt(chosen, chosen));  // a name from an old link
  return sel;
}
async function auditPage(repo, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  const filters = {};
  for (const k of AUDIT_FIELDS) if (q.get(k)) filters[k] = q.get(k);
  const op = filters.op || "";
  const query = {ref: filters.ref, path: filters.path, user: filters.user, since: utcSeconds(filters.from, false), until: utcSeconds(filters.to, true),
                 [op.startsWith("kind:") ? "kind" : "op"]: op.startsWith("kind:") ? op.slice(5) : op, order: "desc", after, amount: PAGE};
  const [data, ops, ref] = await Promise.all([api("GET", route("repositories", repo, "audit"), query),
                                              api("GET", route("repositories", repo, "audit", "operations")),
                                              defaultBranch(repo)]);
  const field = (k, label, type) => el("label", {class: "audit-field"}, label, " ",
    el("input", {id: "audit-" + k, name: k, type: type || "text", value: q.get(k) || "", ...(type ? {} : {placeholder: label})}));
  const form = el("form", {id: "audit-filter", class: "inline", onsubmit: () => {
    const p = new URLSearchParams();
    for (const k of AUDIT_FIELDS) { const v = form.querySelector("#audit-" + k).value; if (v) p.set(k, v); }
    location.assign("#" + route("r", repo, "audit") + (p.toString() ? "?" + p : ""));
  }}, field("ref", "ref"), field("path", "path prefix"), field("user", "user"), el("label", {class: "audit-field"}, "operation ", operationSelect(ops.results, op)),
    field("from", "from (UTC)", "datetime-local"), field("to", "to (UTC)", "datetime-local"), el("button", {type: "submit"}, "filter"),
    Object.keys(filters).length ? link(route("r", repo, "audit"), "clear") : null);
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref),
    el("h3", {}, "Audit trail ", el("span", {class: "muted"}, "(newest first; the last seconds are still on their way)")),
    form, auditTable(data.results, "audit"), data.results.length ? null : el("p", {class: "muted", id: "audit-empty"}, "no records match"),
    pager(data, after, route("r", repo, "audit"), q, filters));
}

// ---- commits, history, diffs ---------------------------------------------------
function commitRows(repo, results) {
  return results.map(c => el("tr", {class: "commit"},
    el("td", {}, link(route("r", repo, "commit", c.id), c.id.slice(0, 12))),
    el("td", {class: "message"}, c.message), el("td", {}, c.committer), el("td", {}, fmtTime(c.creation_date))));
}
function commitTable(repo, results, id) {
  return el("table", {id}, el("tr", {}, el("th", {}, "commit"), el("th", {}, "message"), el("th", {}, "committer"), el("th", {}, "date")),
    commitRows(repo, results));
}

async function commitsPage(repo, ref, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  const [data, picker] = await Promise.all([
    api("GET", route("repositories", repo, "refs", ref, "commits"), {after, amount: PAGE, search: q.get("search") || undefined}),
    breadcrumb(repo, ref, "", r => location.assign("#" + route("r", repo, "commits", r)))]);
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), picker, commitSearch(q),
    data.results.length ? commitTable(repo, data.results, "commits") : commitsEmpty(q),
    pager(data, after, route("r", repo, "commits", ref), q, {search: q.get("search") || undefined}));
}

async function historyPage(repo, ref, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const path = q.get("path") || "";
  const after = q.get("after") || "";
  const isPrefix = path.endsWith("/");
  const [data, crumbs] = await Promise.all([api("GET", route("repositories", repo, "refs", ref, "commits"),
    {after, amount: PAGE, objects: isPrefix ? undefined : path, prefixes: isPrefix ? path : undefined}),
    breadcrumb(repo, ref, path, r => location.assign("#" + route("r", repo, "history", r) + "?path=" + enc(path)))]);
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), crumbs, el("h3", {}, "History of ", el("code", {}, path), " on ", ref),
    data.results.length ? commitTable(repo, data.results, "history") : el("p", {class: "muted"}, "No commit changed it."),
    pager(data, after, route("r", repo, "history", ref), q, {path}));
}

// cmp ({left, right, type}: how the diff was asked) gives each changed object a "diff" button (diff.js).
function diffTable(repo, ref, results, cmp) {
  return el("table", {id: "diff"}, el("tr", {}, el("th", {}, "change"), el("th", {}, "path"), el("th", {}, "size"), cmp ? el("th", {}, "content") : null),
    results.map(d => el("tr", {class: "change " + d.type, "data-path": d.path},
      el("td", {class: d.type}, d.type), el("td", {}, d.type === "removed" || !ref ? d.path : link(route("r", repo, "object", ref) + "?path=" + enc(d.path), d.path)),
      el("td", {}, fmtSize(d.size_bytes)),
      cmp ? el("td", {}, d.path_type === "common_prefix" ? null : diffToggle(repo, cmp, d.path)) : null)));
}

async function commitPage(repo, id, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  // Reached from a commit made on a branch (?branch=): the picker and the tabs stay on that branch, so
  // "objects" is the branch (with its upload), not the read-only commit.
  const on = q.get("branch") || id;
  const [c, crumbs, can] = await Promise.all([api("GET", route("repositories", repo, "commits", id)),
    breadcrumb(repo, on, "", r => location.assign("#" + route("r", repo, "tree", r))), rights(repo)]);
  const parent = (c.parents || [])[0];
  let diffPart;
  if (parent) {
    const d = await api("GET", route("repositories", repo, "refs", parent, "diff", c.id), {after, amount: PAGE, type: "two_dot"});
    diffPart = [diffTable(repo, c.id, d.results, {left: parent, right: c.id, type: "two_dot"}), pager(d, after, route("r", repo, "commit", id), q)];
  } else {
    diffPart = [el("p", {class: "muted"}, "The first commit: no parent to compare with.")];
  }
  const meta = Object.entries(c.metadata || {});
  // Revert this commit on a branch (lakeFS's UI does it from the commit): a new commit undoing its change.
  // A merge commit is reverted against its first parent, the branch it was merged into.
  const target = el("input", {id: "revert-branch", name: "branch", placeholder: "branch", size: 14, required: true});
  const revertMsg = el("div");
  const revert = el("form", {class: "inline", id: "revert-commit", onsubmit: async () => {
    const branch = target.value.trim();
    try {
      await api("POST", route("repositories", repo, "branches", branch, "revert"), {},
                {ref: c.id, parent_number: (c.parents || []).length > 1 ? 1 : 0});
      location.assign("#" + route("r", repo, "commits", branch));
    } catch (e) { revertMsg.replaceChildren(errorBox(e)); }
  }}, "Revert this commit on ", target, el("button", {type: "submit", id: "revert-button"}, "revert"));
  if (on !== id) target.value = on;
  draw(g0, el("h2", {}, repo), repoTabs(repo, on === id ? c.id : on), crumbs,
    el("h3", {}, "Commit ", el("code", {}, c.id)),
    el("pre", {id: "commit-message"}, c.message),
    el("p", {}, c.committer, " · ", fmtTime(c.creation_date), " · parents: ",
      (c.parents || []).map(p => [link(route("r", repo, "commit", p), p.slice(0, 12)), " "])),
    meta.length ? el("table", {}, meta.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))) : null,
    el("p", {}, link(route("r", repo, "tree", c.id), "browse at this commit")),
    parent ? mayNot(revert, can, "WriteRepo") : null, revertMsg,
    ...diffPart);
}

// Counts every page of a diff; null when the user moved on meanwhile (a huge diff kept the page busy after it was left).
async function countAll(fetchPage, g0) {
  const counts = {added: 0, removed: 0, changed: 0};
  let after = "";
  for (;;) {
    if (g0 !== gen) return null;
    const d = await fetchPage(after);
    for (const r of d.results) counts[r.type] = (counts[r.type] || 0) + 1;
    if (!d.pagination.has_more) return counts;
    after = d.pagination.next_offset;
  }
}

async function comparePage(repo, left, right, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  const uncommitted = q.get("uncommitted") === "1";
  const pageOf = a => uncommitted
    ? api("GET", route("repositories", repo, "branches", right, "diff"), {after: a, amount: 1000})
    : api("GET", route("repositories", repo, "refs", left, "diff", right), {after: a, amount: 1000});
  // A diff that cannot be had (uncommitted changes of a tag, a ref that does not exist) is an error under the
  // pickers and the checkbox, so the user can change them (the error alone left only the back button).
  let first;
  try {
    first = uncommitted
      ? await api("GET", route("repositories", repo, "branches", right, "diff"), {after, amount: PAGE})
      : await api("GET", route("repositories", repo, "refs", left, "diff", right), {after, amount: PAGE});
  } catch (e) {
    if (e.status === 401) throw e;
    first = e;
  }
  const go = (l, r, u) => location.assign("#" + route("r", repo, "compare", l, r) + (u ? "?uncommitted=1" : ""));
  // The compared ref is the breadcrumb's; the base has its own picker.
  const lp = await refPicker(repo, left, v => go(v, right, false), "base-picker");
  const crumbs = await breadcrumb(repo, right, "", v => go(left, v, uncommitted));
  const unc = el("label", {}, el("input", {type: "checkbox", id: "uncommitted", checked: uncommitted, onchange: ev => go(left, right, ev.target.checked)}),
    " uncommitted changes of the right branch");
  const pickers = el("div", {}, uncommitted ? null : ["base ", lp, " ← compared: the breadcrumb's ref "], unc);
  if (first instanceof Error) return draw(g0, el("h2", {}, repo), repoTabs(repo, right), crumbs, pickers, errorBox(first));
  const counts = el("p", {class: "counts", id: "counts"}, el("span", {class: "muted"}, "counting…"));
  // Merge the compared ref into the base, when the base is a branch (a tag or commit takes no merge).
  const [baseIsBranch, can] = uncommitted || left === right ? [false, null] : await Promise.all([
    api("GET", route("repositories", repo, "branches", left)).then(() => true, e => { if (e.status === 401) throw e; return false; }),
    rights(repo)]);
  const cmp = {left: uncommitted ? right : left, right, type: uncommitted ? "uncommitted" : "three_dot"};
  const tables = el("div", {id: "iceberg-compare"});  // per Iceberg table: snapshots, schema, rows (tables.js)
  draw(g0, el("h2", {}, repo), repoTabs(repo, right), crumbs, pickers, baseIsBranch ? mergeForm(repo, right, left, can) : null,
    counts, diffTable(repo, right, first.results, cmp),
    pager(first, after, route("r", repo, "compare", left, right), q, uncommitted ? {uncommitted: "1"} : {}), tables);
  if (g0 !== gen) return;  // moved on: no need to count
  // Not awaited: the counts need not wait for it; a failure is said in its section.
  if (!after) compareTables(tables, repo, cmp).catch(e => { if (e.status !== 401) tables.replaceChildren(errorBox(e)); });
  try {
    const c = await countAll(pageOf, g0);
    if (c) counts.replaceChildren(el("span", {class: "added"}, c.added + " added"), el("span", {class: "removed"}, c.removed + " removed"),
      el("span", {class: "changed"}, (c.changed + (c.prefix_changed || 0)) + " changed"));
  } catch (e) { counts.replaceChildren(errorBox(e)); }
}

// ---- live feed (server-sent events) ----------------------------------------------
let gen = 0;  // counts page changes (render)
let live = null;  // the EventSource of the current page, closed when the page changes
const feedSeen = {};  // repository -> the highest event id any page has received (a new EventSource replays)
function subscribe(repo, onEvent) {
  if (live) live.close();
  const es = live = new EventSource(API + route("repositories", repo, "events"), {withCredentials: true});
  // Closed for good (not the normal reconnect): if the session ended (logout in another tab), api() goes to /login.
  es.addEventListener("error", () => { if (es.readyState === EventSource.CLOSED) api("GET", "/user").catch(() => {}); });
  for (const kind of FEED_KINDS) live.addEventListener(kind, ev => {
    let data = {};
    try { data = JSON.parse(ev.data); } catch (_) { return; }
    const eid = Number(ev.lastEventId) || 0;
    const fresh = eid > (feedSeen[repo] || 0);
    if (fresh) feedSeen[repo] = eid;
    onEvent(kind, data, ev.lastEventId, fresh);
  });
  return live;
}
const FEED_KINDS = ["commit", "merge", "revert", "cherry-pick", "branch-created", "branch-deleted", "tag-created", "tag-deleted",
  "protection", "hook-run", "pull-request", "pull-request-comment", "pull-request-approval"];

function describe(kind, d) {
  const skip = new Set(["id", "repository", "branch", "kind", "time"]);
  return Object.entries(d).filter(([k]) => !skip.has(k)).map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v)).join(" ");
}

async function feedPage(repo) {
  const g0 = gen;  // drawn only if the user is still on this page
  const body = el("tbody", {});
  const status = el("span", {class: "muted", id: "feed-status"}, "connecting…");
  const ref = await defaultBranch(repo);
  const crumbs = await repoCrumb(repo, ref);
  if (g0 !== gen) return;  // the user moved on: no stream for a page not shown
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), crumbs, el("h3", {}, "Live feed ", status),
    el("table", {id: "feed"}, el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "time"), el("th", {}, "event"),
      el("th", {}, "branch"), el("th", {}, "details"))), body));
  const es = subscribe(repo, (kind, d, eventId) => {
    body.prepend(el("tr", {class: "event", "data-kind": kind}, el("td", {}, eventId), el("td", {}, fmtTime(d.time)),
      el("td", {}, kind), el("td", {}, d.branch || ""), el("td", {}, describe(kind, d))));
  });
  // The server answers each poll with what is new and closes; EventSource reconnects (retry: 1000 ms)
  // with Last-Event-ID, so an error while it reconnects is the normal rhythm, not an outage. No open within
  // FEED_GRACE ms of an error is one (the server stopped or restarts): the page said "live" all along.
  let outage = null;
  es.onopen = () => { clearTimeout(outage); outage = null; status.replaceChildren("live"); };
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) { clearTimeout(outage); status.replaceChildren("disconnected"); return; }
    if (outage === null) outage = setTimeout(() => { if (es.readyState !== EventSource.OPEN) status.replaceChildren("reconnecting…"); }, FEED_GRACE);
  };
}
const FEED_GRACE = 3000;

// ---- pull requests -------------------------------------------------------------
async function pullsPage(repo, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const st = q.get("status") || "open";
  const after = q.get("after") || "";
  const [data, branches, ref, can] = await Promise.all([
    api("GET", route("repositories", repo, "pulls"), {status: st, after, amount: PAGE}),
    api("GET", route("repositories", repo, "branches"), {amount: 1000}), defaultBranch(repo), rights(repo)]);
  const names = branches.results.map(b => b.id);
  const sel = (id, value, label) => el("select", {id, "aria-label": label}, names.map(n => el("option", {value: n, selected: n === value}, n)));
  const src = sel("pr-source", names.find(n => n !== ref) || names[0], "source branch");
  const dst = sel("pr-destination", names.includes(ref) ? ref : names[0], "destination branch");
  const title = el("input", {id: "pr-title", placeholder: "title", size: 40, required: true});
  const desc = el("textarea", {id: "pr-description", placeholder: "description", rows: 3, cols: 60});
  const msg = el("div");
  const form = el("form", {id: "open-pr", onsubmit: async ev => {
    ev.preventDefault();
    try {
      const r = await api("POST", route("repositories", repo, "pulls"), {},
        {source_branch: src.value, destination_branch: dst.value, title: title.value, description: desc.value});
      location.assign("#" + route("r", repo, "pull", String(r.id)));
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  }}, el("h3", {}, "Open a pull request"), el("div", {}, src, " → ", dst, " ", title), el("div", {}, desc),
    el("button", {type: "submit"}, "open pull request"), msg);
  const filters = el("p", {}, ["open", "closed", "merged", "all"].map(s => [s === st ? el("strong", {}, s) :
    link(route("r", repo, "pulls") + "?status=" + s, s), " "]));
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), await repoCrumb(repo, ref), filters,
    data.results.length ? el("table", {id: "pulls"}, el("tr", {}, el("th", {}, "#"), el("th", {}, "title"), el("th", {}, "branches"),
      el("th", {}, "author"), el("th", {}, "status")),
      data.results.map(p => el("tr", {class: "pull"}, el("td", {}, link(route("r", repo, "pull", String(p.id)), "#" + p.id)),
        el("td", {}, link(route("r", repo, "pull", String(p.id)), p.title)), el("td", {}, p.source_branch + " → " + p.destination_branch),
        el("td", {}, p.author), el("td", {}, p.status)))) : el("p", {class: "muted"}, "No " + st + " pull requests."),
    pager(data, after, route("r", repo, "pulls"), q, {status: st}), mayNot(form, can, "WriteRepo"));
}

function conflictList(message) {
  const m = /^(?:conflict found: )?merge conflict on \d+ path\(s\): (.*)$/.exec(message || "");
  if (!m) return null;
  return el("ul", {id: "conflicts"}, m[1].split(", ").map(p => el("li", {}, p)));
}

// A hook's output is served as application/octet-stream (as lakeFS does): a plain link only downloaded a file
// named "output". A click shows it under the link (again: hides it); the link still downloads it, as <id>.log.
function hookOutput(repo, runId, h) {
  const url = API + route("repositories", repo, "actions", "runs", runId, "hooks", h.hook_run_id, "output");
  const out = el("pre", {class: "hook-output", hidden: true});
  const show = async ev => {
    ev.preventDefault();
    if (!out.hidden) { out.hidden = true; return; }
    try {
      const r = await fetch(url, {credentials: "same-origin"});
      if (r.status === 401) { location.assign("/login" + location.hash); return; }
      out.replaceChildren(r.ok ? (await r.text()) || "(no output)" : "HTTP " + r.status);
    } catch (e) { out.replaceChildren(String(e)); }
    out.hidden = false;
  };
  return [el("a", {href: url, download: h.hook_id + ".log", class: "hook-link", onclick: show}, h.action + "/" + h.hook_id + ": " + h.status), " ", out];
}

async function runsTable(repo, query) {
  const runs = await api("GET", route("repositories", repo, "actions", "runs"), {amount: 20, ...query});
  const rows = [];
  for (const r of runs.results) {
    let hooks = [];
    try { hooks = (await api("GET", route("repositories", repo, "actions", "runs", r.run_id, "hooks"))).results; } catch (_) { /* shown empty */ }
    rows.push(el("tr", {class: "run " + r.status}, el("td", {}, r.event_type), el("td", {}, r.branch),
      el("td", {class: r.status === "completed" ? "ok" : "error"}, r.status), el("td", {}, fmtTime(r.start_time)),
      el("td", {}, hooks.map(h => hookOutput(repo, r.run_id, h)))));
  }
  return rows.length ? el("table", {class: "runs"}, el("tr", {}, el("th", {}, "event"), el("th", {}, "branch"), el("th", {}, "status"),
    el("th", {}, "started"), el("th", {}, "hooks (output)")), rows) : el("p", {class: "muted"}, "No hook runs.");
}

async function pullPage(repo, id) {
  const g0 = gen;  // drawn only if the user is still on this page
  const base = route("repositories", repo, "pulls", id);
  const [p, comments, can] = await Promise.all([api("GET", base), api("GET", base + "/comments"), rights(repo)]);
  const msg = el("div", {id: "pr-message", "data-pull": id});
  // An action's outcome goes to the message box on the page as it is when the outcome arrives: a live re-render
  // (this user's own comment coming back on the feed) may have replaced this page's box while the request ran,
  // and a refusal written into the replaced box was never seen.
  const box = () => {
    if (msg.isConnected) return msg;
    const now = document.getElementById("pr-message");
    return now && now.dataset.pull === String(id) ? now : msg;
  };
  // The hook runs on the destination, redrawn where they are: a merge attempt runs the pre-merge hooks, and a
  // refused one re-renders nothing else (the page kept saying "No hook runs" until a reload).
  const runsBox = el("div", {id: "pr-runs"});
  const refreshRuns = async () => {
    const fresh = await runsTable(repo, {branch: p.destination_branch});
    if (runsBox.isConnected) runsBox.replaceChildren(fresh);
  };
  const act = (fn, sent, ran) => async ev => {
    if (ev) ev.preventDefault();
    box().replaceChildren();
    try {
      await fn();
      if (sent) {  // the box the comment was typed in, or the one a live re-render carried its draft into
        const now = document.getElementById("comment-body");
        body.value = "";
        if (now && now.dataset.pull === String(id)) now.value = "";
      }
      await pullPage(repo, id);
    } catch (e) {
      box().replaceChildren(errorBox(e), conflictList(e.message) || "");
      if (ran) await ran().catch(() => {});
    }
  };
  let diff;
  try {
    let left = p.destination_branch, right = p.source_branch;
    if (p.status === "merged" && p.merged_commit_id) {  // what the merge commit brought into the destination
      const mc = await api("GET", route("repositories", repo, "commits", p.merged_commit_id));
      left = (mc.parents || [mc.id])[0]; right = mc.id;
    }
    const d = await api("GET", route("repositories", repo, "refs", left, "diff", right),
      {amount: PAGE, type: p.status === "merged" ? "two_dot" : "three_dot"});
    diff = [diffTable(repo, right, d.results, {left, right, type: p.status === "merged" ? "two_dot" : "three_dot"})];  // merged: the objects as the merge made them (the source may be gone)
    if (d.pagination.has_more) diff.push(el("p", {class: "muted"}, "first " + PAGE + " changes; see compare"));
  } catch (e) { diff = [errorBox(e)]; }
  const body = el("textarea", {id: "comment-body", rows: 3, cols: 60, required: true, "data-pull": id, "aria-label": "comment"});
  const strategy = el("select", {id: "merge-strategy", "aria-label": "merge strategy"}, el("option", {value: ""}, "default (fail on conflict)"),
    el("option", {value: "source-wins"}, "source-wins"), el("option", {value: "dest-wins"}, "dest-wins"));
  const approvals = p.approvals || [];
  const open = p.status === "open";
  // A live re-render keeps the draft being typed and the message shown (a refusal must not vanish
  // because the user's own comment, or someone else's, came back on the feed a moment later).
  const shownRef = p.status === "merged" ? p.destination_branch : p.source_branch;
  const crumbs = await repoCrumb(repo, shownRef);
  runsBox.replaceChildren(await runsTable(repo, {branch: p.destination_branch}));  // the last wait: what is shown is read after it
  const old = document.getElementById("comment-body");
  if (old && old.dataset.pull === String(id)) {
    body.value = old.value;
    const shown = document.getElementById("pr-message");
    if (shown && msg.childNodes.length === 0) msg.replaceChildren(...shown.childNodes);
  }
  draw(g0, el("h2", {}, repo), repoTabs(repo, shownRef), crumbs,
    el("h3", {id: "pr-title"}, "#" + p.id + " ", p.title, " ", el("span", {class: "muted", id: "pr-status"}, "[" + p.status + "]")),
    el("p", {}, p.source_branch + " → " + p.destination_branch + " · by " + p.author + " · ", fmtTime(p.creation_date)),
    el("pre", {id: "pr-description"}, p.description || ""),
    el("p", {id: "pr-approvals"}, "approvals: " + approvals.length + " of " + p.required_approvals + " required",
      approvals.length ? " (" + approvals.map(a => a.user).join(", ") + ")" : ""),
    msg,
    open ? mayNot(el("div", {class: "pr-actions"},
      ownPull(el("button", {id: "approve", onclick: act(() => api("POST", base + "/approvals"))}, "approve"), p), " ",
      el("form", {class: "inline", id: "merge-form", onsubmit: act(() => api("PUT", base + "/merge", {}, strategy.value ? {strategy: strategy.value} : {}), false, refreshRuns)},
        strategy, el("button", {type: "submit", id: "merge"}, "merge")), " ",
      el("button", {id: "close", onclick: act(() => api("PATCH", base, {}, {status: "closed"}))}, "close")), can, "WriteRepo")
      : p.status === "closed" ? mayNot(el("button", {id: "reopen", onclick: act(() => api("PATCH", base, {}, {status: "open"}))}, "reopen"), can, "WriteRepo")
        : el("p", {}, "merged as ", link(route("r", repo, "commit", p.merged_commit_id || ""), (p.merged_commit_id || "").slice(0, 12))),
    el("h3", {}, "Changes"), ...diff,
    el("h3", {}, "Hook runs on " + p.destination_branch), runsBox,
    el("h3", {}, "Comments"),
    el("div", {id: "comments"}, comments.results.map(c => el("div", {class: "comment"},
      el("p", {class: "muted"}, c.author + " · ", fmtTime(c.creation_date)), el("pre", {}, c.body)))),
    mayNot(el("form", {id: "comment-form", onsubmit: act(() => api("POST", base + "/comments", {}, {body: body.value}), true)},
      body, el("div", {}, el("button", {type: "submit", id: "comment"}, "comment"))), can, "WriteRepo"));
  // Live: another user's comment, approval or merge re-renders this page. A new EventSource replays the
  // feed from its start; events from before this page was rendered (minus clock slack) are not news.
  // Not when the user moved on while this page loaded: that would close the new page's stream (the live feed's).
  if (g0 !== gen) return;
  const since = Date.now() / 1000 - 2;
  subscribe(repo, (kind, d, _eid, fresh) => {
    if (!fresh || d.time < since) return;
    // Hooks that ran on the destination (this page's merge, or anyone's commit there) show without a reload.
    if (kind === "hook-run" && d.branch === p.destination_branch) { refreshRuns().catch(() => {}); return; }
    if (String(d.id) !== String(id) || !kind.startsWith("pull-request") || d.action === "opened") return;
    if (location.hash.includes("/pull/")) pullPage(repo, id).catch(() => {});
  });
}

// ---- hook runs, protection -------------------------------------------------------
async function actionsPage(repo, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const [ref, runs] = await Promise.all([defaultBranch(repo), runsTable(repo, {branch: q.get("branch") || undefined})]);
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), await repoCrumb(repo, ref), el("h3", {id: "runs-page"}, "Hook runs"), runs);
}

async function settingsPage(repo) {
  const g0 = gen;  // drawn only if the user is still on this page
  const url = route("repositories", repo, "settings", "branch_protection");
  const [rules, ref, can] = await Promise.all([api("GET", url), defaultBranch(repo), rights(repo)]);
  const msg = el("div");
  const save = async list => {
    try { await api("PUT", url, {}, list); await settingsPage(repo); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const pattern = el("input", {id: "rule-pattern", placeholder: "branch pattern, e.g. main or rel-*", required: true});
  const approvals = el("input", {id: "rule-approvals", type: "number", min: 0, value: 0, size: 4, "aria-label": "required approvals"});
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), await repoCrumb(repo, ref), el("h3", {}, "Branch protection"),
    el("p", {class: "muted"}, "A protected branch changes only by merge (and revert); a merge needs the approvals the rule requires."),
    rules.length ? el("table", {id: "rules"}, el("tr", {}, el("th", {}, "pattern"), el("th", {}, "required approvals"), el("th", {}, "")),
      rules.map((r, i) => el("tr", {}, el("td", {}, r.pattern), el("td", {}, r.required_approvals),
        el("td", {}, mayNot(el("button", {onclick: () => save(rules.filter((_, j) => j !== i))}, "remove"), can, "DeleteRepo"))))) : el("p", {class: "muted"}, "No rules."),
    mayNot(el("form", {class: "inline", id: "add-rule", onsubmit: ev => { ev.preventDefault();
      save([...rules, {pattern: pattern.value.trim(), required_approvals: Number(approvals.value) || 0}]); }},
      pattern, " approvals ", approvals, el("button", {type: "submit"}, "add rule")), can, "DeleteRepo"), msg,
    mayNot(await gcRulesSection(repo), can, "DeleteRepo"));
}

// GC rules: the retention `lakemount gc run` applies (lakeFS's settings/gc_rules).
async function gcRulesSection(repo) {
  const url = route("repositories", repo, "settings", "gc_rules");
  let rules = null;
  try { rules = await api("GET", url); } catch (e) { if (e.status !== 404) return errorBox(e); }
  const msg = el("div");
  const save = async body => {
    try { await (body ? api("PUT", url, {}, body) : api("DELETE", url)); await settingsPage(repo); }
    catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const current = rules || {default_retention_days: 21, branches: []};
  const days = el("input", {id: "gc-default-days", type: "number", min: 0, value: current.default_retention_days, size: 4, "aria-label": "default retention days"});
  const branch = el("input", {id: "gc-branch", placeholder: "branch"});
  const branchDays = el("input", {id: "gc-branch-days", type: "number", min: 0, value: 90, size: 4, "aria-label": "branch retention days"});
  return el("div", {id: "gc-rules"}, el("h3", {}, "Garbage collection rules"),
    el("p", {class: "muted"}, rules ? "Commits older than these days (and not a branch head or tag) are collected by `lakemount gc run`."
      : "No GC rules: `lakemount gc run` refuses to run until they are set."),
    rules && rules.branches.length ? el("table", {id: "gc-branches"}, el("tr", {}, el("th", {}, "branch"), el("th", {}, "retention days"), el("th", {}, "")),
      rules.branches.map((b, i) => el("tr", {}, el("td", {}, b.branch_id), el("td", {}, b.retention_days),
        el("td", {}, el("button", {onclick: () => save({...current, branches: current.branches.filter((_, j) => j !== i)})}, "remove"))))) : "",
    el("form", {class: "inline", id: "gc-default", onsubmit: ev => { ev.preventDefault();
      save({...current, default_retention_days: Number(days.value) || 0}); }},
      "default retention days ", days, el("button", {type: "submit"}, rules ? "save" : "set rules")),
    el("form", {class: "inline", id: "gc-add-branch", onsubmit: ev => { ev.preventDefault();
      const name = branch.value.trim();
      save({...current, branches: [...current.branches.filter(b => b.branch_id !== name), {branch_id: name, retention_days: Number(branchDays.value) || 0}]}); }},
      branch, " days ", branchDays, el("button", {type: "submit"}, "set branch rule")),
    rules ? el("button", {id: "gc-delete", onclick: () => confirm("Delete the GC rules?") ? save(null) : null}, "delete rules") : "",
    msg);
}

// ---- administration: users, groups, access keys, policies ---------------------------
async function usersPage() {
  const g0 = gen;  // drawn only if the user is still on this page
  const users = await api("GET", "/auth/users", {amount: 1000});
  const msg = el("div");
  const run = fn => async ev => {
    if (ev) ev.preventDefault();
    try { await fn(); await usersPage(); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const name = el("input", {id: "new-user", placeholder: "user id", required: true});
  draw(g0, el("h2", {}, "Users"), msg,
    el("table", {id: "users"}, el("tr", {}, el("th", {}, "user"), el("th", {}, "created"), el("th", {}, "")),
      users.results.map(u => el("tr", {}, el("td", {}, link(route("admin", "users", u.id), u.id)), el("td", {}, fmtTime(u.creation_date)),
        el("td", {}, el("button", {onclick: run(() => confirm("Delete user " + u.id + "?") ? api("DELETE", route("auth", "users", u.id)) : null)}, "delete"))))),
    el("form", {class: "inline", id: "create-user", onsubmit: run(() => api("POST", "/auth/users", {}, {id: name.value.trim()}))},
      name, el("button", {type: "submit"}, "create user")),
    el("p", {}, link(route("admin", "groups"), "groups"), " ", link(route("admin", "policies"), "policies")));
}

async function userPage(id) {
  const g0 = gen;  // drawn only if the user is still on this page
  // A user without ManageUsers may still see their own page (ManageOwnCredentials: keys, their policies and groups)
  // but not every policy and group: their page is the keys and what they have, without the admin's forms.
  const unlessForbidden = p => p.catch(e => { if (e.status === 403) return null; throw e; });
  const [keys, attached, policies, mine, groups] = await Promise.all([
    api("GET", route("auth", "users", id, "credentials"), {amount: 1000}),
    api("GET", route("auth", "users", id, "policies"), {amount: 1000}),
    unlessForbidden(api("GET", "/auth/policies", {amount: 1000})),
    api("GET", route("auth", "users", id, "groups"), {amount: 1000}),
    unlessForbidden(api("GET", "/auth/groups", {amount: 1000}))]);
  const manage = policies !== null && groups !== null;
  const msg = el("div", {id: "admin-message"});
  const run = fn => async ev => {
    if (ev) ev.preventDefault();
    try { const r = await fn(); await userPage(id); if (r) document.getElementById("admin-message").replaceChildren(r); }
    catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  // A pick-and-add form shows only when there is something left to pick: with an empty list its button sent
  // PUT .../policies/ (answered "no such API path") or did nothing.
  const have = new Set(attached.results.map(p => p.id));
  const pick = el("select", {id: "attach-policy", "aria-label": "policy to attach"}, (policies ? policies.results : []).filter(p => !have.has(p.id)).map(p => el("option", {value: p.id}, p.id)));
  const member = new Set(mine.results.map(g => g.id));
  const pickGroup = el("select", {id: "join-group", "aria-label": "group to join"}, (groups ? groups.results : []).filter(g => !member.has(g.id)).map(g => el("option", {value: g.id}, g.id)));
  draw(g0, el("h2", {}, "User ", id), msg,
    el("h3", {}, "Access keys"),
    el("table", {id: "keys"}, el("tr", {}, el("th", {}, "access key id"), el("th", {}, "created"), el("th", {}, "")),
      keys.results.map(k => el("tr", {}, el("td", {}, k.access_key_id), el("td", {}, fmtTime(k.creation_date)),
        el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "users", id, "credentials", k.access_key_id)))}, "revoke"))))),
    el("button", {id: "create-key", onclick: run(async () => {
      const c = await api("POST", route("auth", "users", id, "credentials"));
      return el("p", {class: "ok"}, "New key ", el("code", {}, c.access_key_id), " secret ", el("code", {id: "new-secret"}, c.secret_access_key),
        " (shown only now)");
    })}, "create access key"),
    el("h3", {}, "Policies"),
    el("table", {id: "user-policies"}, attached.results.map(p => el("tr", {}, el("td", {}, p.id),
      manage ? el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "users", id, "policies", p.id)))}, "detach")) : null))),
    manage && pick.options.length ? el("form", {class: "inline", onsubmit: run(() => api("PUT", route("auth", "users", id, "policies", pick.value)))},
      pick, el("button", {type: "submit"}, "attach")) : null,
    el("h3", {}, "Groups (their policies apply too)"),
    el("table", {id: "user-groups"}, mine.results.map(g => el("tr", {}, el("td", {}, manage ? link(route("admin", "groups", g.id), g.id) : g.id),
      manage ? el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "groups", g.id, "members", id)))}, "leave")) : null))),
    !manage ? el("p", {class: "muted", id: "managed-by-admin"}, "Policies and groups are changed by an administrator.")
      : pickGroup.options.length ? el("form", {class: "inline", onsubmit: run(() => api("PUT", route("auth", "groups", pickGroup.value, "members", id)))},
        pickGroup, el("button", {type: "submit"}, "add to group")) : null);
}

async function groupsPage() {
  const g0 = gen;  // drawn only if the user is still on this page
  const groups = await api("GET", "/auth/groups", {amount: 1000});
  const msg = el("div");
  const run = fn => async ev => {
    if (ev) ev.preventDefault();
    try { await fn(); await groupsPage(); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const name = el("input", {id: "new-group", placeholder: "group id", required: true});
  const about = el("input", {id: "new-group-description", placeholder: "description"});
  draw(g0, el("h2", {}, "Groups"), msg,
    el("table", {id: "groups"}, el("tr", {}, el("th", {}, "group"), el("th", {}, "description"), el("th", {}, "created"), el("th", {}, "")),
      groups.results.map(g => el("tr", {}, el("td", {}, link(route("admin", "groups", g.id), g.id)), el("td", {}, g.description || ""),
        el("td", {}, fmtTime(g.creation_date)),
        el("td", {}, el("button", {onclick: run(() => confirm("Delete group " + g.id + "?") ? api("DELETE", route("auth", "groups", g.id)) : null)}, "delete"))))),
    el("form", {class: "inline", id: "create-group", onsubmit: run(() => api("POST", "/auth/groups", {}, {id: name.value.trim(), description: about.value}))},
      name, about, el("button", {type: "submit"}, "create group")));
}

async function groupPage(id) {
  const g0 = gen;  // drawn only if the user is still on this page
  const [group, members, attached, users, policies] = await Promise.all([
    api("GET", route("auth", "groups", id)),
    api("GET", route("auth", "groups", id, "members"), {amount: 1000}),
    api("GET", route("auth", "groups", id, "policies"), {amount: 1000}),
    api("GET", "/auth/users", {amount: 1000}),
    api("GET", "/auth/policies", {amount: 1000})]);
  const msg = el("div");
  const run = fn => async ev => {
    if (ev) ev.preventDefault();
    try { await fn(); await groupPage(id); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const inGroup = new Set(members.results.map(u => u.id));
  const have = new Set(attached.results.map(p => p.id));
  const pickUser = el("select", {id: "add-member", "aria-label": "user to add"}, users.results.filter(u => !inGroup.has(u.id)).map(u => el("option", {value: u.id}, u.id)));
  const pick = el("select", {id: "attach-group-policy", "aria-label": "policy to attach"}, policies.results.filter(p => !have.has(p.id)).map(p => el("option", {value: p.id}, p.id)));
  draw(g0, el("h2", {}, "Group ", id), el("p", {}, group.description || ""), msg,
    el("h3", {}, "Members"),
    el("table", {id: "group-members"}, members.results.map(u => el("tr", {}, el("td", {}, link(route("admin", "users", u.id), u.id)),
      el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "groups", id, "members", u.id)))}, "remove"))))),
    pickUser.options.length ? el("form", {class: "inline", onsubmit: run(() => api("PUT", route("auth", "groups", id, "members", pickUser.value)))},
      pickUser, el("button", {type: "submit"}, "add member")) : null,
    el("h3", {}, "Policies (every member has them)"),
    el("table", {id: "group-policies"}, attached.results.map(p => el("tr", {}, el("td", {}, p.id),
      el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "groups", id, "policies", p.id)))}, "detach"))))),
    pick.options.length ? el("form", {class: "inline", onsubmit: run(() => api("PUT", route("auth", "groups", id, "policies", pick.value)))},
      pick, el("button", {type: "submit"}, "attach")) : null);
}

async function policiesPage() {
  const g0 = gen;  // drawn only if the user is still on this page
  const policies = await api("GET", "/auth/policies", {amount: 1000});
  draw(g0, el("h2", {}, "Policies"), el("table", {id: "policies"}, el("tr", {}, el("th", {}, "policy"), el("th", {}, "statements")),
    policies.results.map(p => el("tr", {}, el("td", {}, p.id), el("td", {}, el("pre", {}, JSON.stringify(p.statement || [], null, 1)))))));
}

// ---- routing -------------------------------------------------------------------
async function whoami() {
  if (me) {
    // Each page change re-checks, without waiting: another tab may have logged in as someone else (one cookie
    // for all tabs) or out (api() then goes to the login page).
    api("GET", "/user").then(u => { if (u.user.id !== me.id) { me = null; whoami().catch(() => {}); } }).catch(() => {});
    return me;
  }
  const u = await api("GET", "/user");
  // Whether this user administers users (ManageUsers): only then the users, groups and policies pages are theirs.
  const admin = await api("GET", "/auth/users", {amount: 1}).then(() => true, e => { if (e.status === 403) return false; throw e; });
  me = {id: u.user.id, admin};
  const who = document.getElementById("who");
  who.replaceChildren(el("span", {id: "user"}, link(route("admin", "users", u.user.id), u.user.id)), el("button", {id: "logout", onclick: logout}, "log out"));
  document.getElementById("nav").replaceChildren(link("/", "repositories"), ...(admin ? [" ", link(route("admin", "users"), "users"),
    " ", link(route("admin", "groups"), "groups"), " ", link(route("admin", "policies"), "policies")] : []));
  return me;
}

function render() { return busy(renderPage); }

async function renderPage() {
  const g0 = ++gen;
  if (live) { live.close(); live = null; }
  if (location.pathname === "/login") return loginPage();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [pathPart, query] = hash.split("?", 2);
  const q = new URLSearchParams(query || "");
  try {
    const parts = pathPart.split("/").filter((p, i) => i > 0).map(dec);
    await whoami();
    // Pages note ``gen`` when they start: one started after a newer page change would draw over it.
    if (g0 !== gen) return;
    if (parts[0] === "r" && parts.length >= 4) {
      const repo = parts[1], view = parts[2], ref = parts[3];
      if (view === "tree") return await treePage(repo, ref, treePrefix(parts.slice(4)), q);
      if (view === "tables") return await tablesPage(repo, ref);
      if (view === "table") return await tablePage(repo, ref, q);
      if (view === "object") return await objectPage(repo, ref, q);
      if (view === "commits") return await commitsPage(repo, ref, q);
      if (view === "history") return await historyPage(repo, ref, q);
      if (view === "commit") return await commitPage(repo, ref, q);
      if (view === "compare") return await comparePage(repo, ref, parts[4] || ref, q);
      if (view === "pull") return await pullPage(repo, ref);
      if (view === "refs") return await refsPage(repo, ref);
      if (view === "changes") return await changesPage(repo, ref, q);
    }
    if (parts[0] === "r" && parts.length === 3) {
      const repo = parts[1], view = parts[2];
      if (view === "pulls") return await pullsPage(repo, q);
      if (view === "feed") return await feedPage(repo);
      if (view === "audit") return await auditPage(repo, q);
      if (view === "actions") return await actionsPage(repo, q);
      if (view === "settings") return await settingsPage(repo);
    }
    if (parts[0] === "admin") {
      if (parts[1] === "users" && parts[2]) return await userPage(parts[2]);
      if (parts[1] === "users") return await usersPage();
      if (parts[1] === "groups" && parts[2]) return await groupPage(parts[2]);
      if (parts[1] === "groups") return await groupsPage();
      if (parts[1] === "policies") return await policiesPage();
    }
    if (parts.length === 0 || parts[0] === "") return await reposPage(q);
    show(pageError({status: 404, message: "no such page"}));
  } catch (e) {
    if (e.status !== 401 && g0 === gen) show(pageError(e));
  }
}

window.addEventListener("hashchange", render);
window.addEventListener("DOMContentLoaded", render);
