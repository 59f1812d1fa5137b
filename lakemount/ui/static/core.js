// lakemount web UI, the helpers every page module imports: a client of /api/v1. Every value from the server is
// inserted as text (el() makes text nodes and attributes, never parsed markup), so object names, commit messages
// and previews cannot inject markup. State changes send the CSRF header (double-submit of the lakemount_csrf
// cookie). Also the state pages share: which page change is current (gen: a slow page that finishes after the user
// moved on draws nothing), the live feed's EventSource, the logged-in user, and the busy indicator.

import {errorHint} from "./live.js";

export const API = "/api/v1";
export const PAGE = 100;
export const TABLE_POINTER = "_iceberg_table.json";  // an Iceberg table's pointer object in its directory (lakemount/table_pointers.py)

export function el(tag, attrs, ...children) {
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

export function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return v.join("=");
  }
  return "";
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function api(method, path, query, body) {
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
// "Loading…" once BUSY_DELAY ms have passed (a quick page does not flicker). It is about the page shown: the
// current page's load (loading(), app.js's render) and the actions running (busy(), counted, so overlapping work
// clears it only when the last one ends). A load superseded by a newer page change draws nothing (gen), so it no
// longer holds the page busy: once the page the user moved to is drawn, main is not aria-busy even while a request
// of the page left behind still runs (a slow filtered listing kept the cleared filter's page "loading" for as long
// as it took). busyCount counts every load and action still running, superseded ones included.
export const BUSY_DELAY = 150;
export let busyCount = 0;
export let busyTimer = null;
let actions = 0;  // busy()'s work running
let loadingGen = 0;  // the gen whose page load runs (gen starts at 0 and only grows: 0 is none)
function showBusy() {
  const on = actions > 0 || (loadingGen !== 0 && loadingGen === gen);
  if (on && !main().hasAttribute("aria-busy")) {
    main().setAttribute("aria-busy", "true");
    busyTimer = setTimeout(() => { document.getElementById("busy").textContent = "Loading…"; }, BUSY_DELAY);
  } else if (!on && main().hasAttribute("aria-busy")) {
    clearTimeout(busyTimer);
    main().removeAttribute("aria-busy");
    document.getElementById("busy").textContent = "";
  }
}
export async function busy(fn) {
  actions++; busyCount++;
  showBusy();
  try { return await fn(); } finally { actions--; busyCount--; showBusy(); }
}
// A page load: ``fn`` turns the page (turnPage(), before its first await) and draws it; the page is busy until it
// ends or a newer page change supersedes it.
export async function loading(fn) {
  busyCount++;
  const running = fn();
  const g = loadingGen = gen;
  showBusy();
  try { return await running; } finally {
    busyCount--;
    if (loadingGen === g) loadingGen = 0;
    showBusy();
  }
}

// A form's submit or a button's click runs one request at a time: its buttons are disabled until the action
// ends (a double click merged or committed twice), and the page shows it is busy. A form's default submit
// (a reload of the page) is always prevented, also for the submit ignored while the first one runs.
export function action(handler) {
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
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
export function enc(s) {
  s = String(s);
  try { return encodeURIComponent(s); } catch (e) { return encodeURIComponent(s.replace(LONE_SURROGATE, "\uFFFD")); }
}
export function dec(s) {
  try { return decodeURIComponent(s); } catch (e) { throw new Error(`the address holds a malformed %-escape: ${s}`); }
}
export const main = () => document.getElementById("main");
// A redraw keeps the keyboard's place: the element focused before (a field being typed in, the button just
// used) is focused again in the new page when it has the same id, with its caret; else focus goes to main,
// so the next Tab is in the page, not back at the header (a keyboard user started over after every action).
export function show(...nodes) {
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
export let focusAfter = "";  // the id of the control whose action is running (disabled, so it lost the focus)
// A page's slow load (or a live re-render) that finishes after the user moved on must not draw over the new page.
export function draw(g, ...nodes) { if (g === gen) show(...nodes); }
// What went wrong (the server's message) and, from live.js, what to do about it.
export function errorBox(e) {
  const hint = errorHint(e);
  return el("p", {class: "error", role: "alert"}, String(e && e.message || e), hint ? el("span", {class: "hint"}, " ", hint) : null);
}
export function fmtSize(n) {
  if (n === undefined || n === null) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; let x = n;
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return (i ? x.toFixed(1) : x) + " " + u[i];
}
// One date format everywhere: relative ("3 min ago") with the exact UTC time (ISO 8601) as the tooltip. The API
// gives seconds since the epoch (commits, objects) or ISO text (pull requests, hook runs): both are taken.
export function fmtTime(t) {
  if (t === undefined || t === null || t === "" || t === 0) return "";
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  if (isNaN(d.getTime())) return String(t);
  const iso = d.toISOString();
  return el("time", {datetime: iso, title: iso}, relTime(d));
}
export function relTime(d) {
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
export function link(hash, ...text) { return el("a", {href: "#" + hash}, ...text); }
export function route(...parts) { return "/" + parts.map(p => enc(p)).join("/"); }

// The logged-in user ({id, admin}), as app.js's whoami() last learned it; ownPull() reads it.
export let me = null;
export function setMe(user) { me = user; }

// Forward paging with a stack of previous offsets in the URL (?after=..&back=..).
export function pager(data, after, base, q, extra) {
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

// ---- the current page, and its live feed (server-sent events) --------------------
export let gen = 0;  // counts page changes (render)
export let live = null;  // the EventSource of the current page, closed when the page changes
// A page change (app.js's render): the previous page's live feed closes, and whatever it still draws is dropped
// (draw() and the pages compare the gen they started with). Returns the new page's gen.
export function turnPage() {
  if (live) { live.close(); live = null; }
  return ++gen;
}
export const feedSeen = {};  // repository -> the highest event id any page has received (a new EventSource replays)
export function subscribe(repo, onEvent) {
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
export const FEED_KINDS = ["commit", "merge", "revert", "cherry-pick", "branch-created", "branch-deleted", "tag-created", "tag-deleted",
  "protection", "hook-run", "pull-request", "pull-request-comment", "pull-request-approval"];
