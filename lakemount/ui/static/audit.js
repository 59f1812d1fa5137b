// lakemount web UI: the audit trail page (who read or changed what, filtered by ref, path, user, operation and
// time) and the object page's "who touched it" panel.

import {api, draw, el, enc, fmtSize, gen, link, PAGE, pager, route} from "./core.js";
import {defaultBranch, repoTabs} from "./nav.js";

// ---- audit trail ------------------------------------------------------------------
// Paths and user names are shown as stored, with control characters escaped (\xNN), as the CLI shows them:
// a name holding a newline or a terminal escape reads as what it is.
export function shown(s) {
  return String(s).replace(/[\\\u0000-\u001f\u007f-\u009f\u2028\u2029]/g,
    c => c === "\\" ? "\\\\" : "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0").slice(-4));
}
// One line per record at 1,280 px (issue 38): no cell wraps; a long user, ref, path or client is cut with an
// ellipsis (style.css) and shown whole as the cell's tooltip.
export function cut(cls, text) { return el("td", {class: cls, title: text}, text); }
export function auditRows(results) {
  return results.map(r => el("tr", {class: "audit", "data-id": r.id}, el("td", {class: "time"}, r.time.replace("T", " ").slice(0, 23)),
    cut("user", shown(r.user)), el("td", {}, r.frontend), el("td", {class: "op"}, r.op), el("td", {}, String(r.status)),
    el("td", {}, fmtSize(r.bytes)), cut("ref", shown(r.ref) + (r.commit ? "@" + r.commit.slice(0, 12) : "")),
    cut("path", shown(r.path)), cut("client muted", r.pid >= 0 ? shown(r.process) + " pid " + r.pid : shown(r.client || ""))));
}
export function auditTable(results, id) {
  const heads = [["time", "time (UTC)"], ["user", "user"], ["via", "via"], ["op", "operation"], ["status", "status"], ["bytes", "bytes"],
                 ["ref", "ref"], ["path", "path"], ["client", "client"]];
  return el("table", {id, class: "audit-table"}, el("tr", {}, heads.map(([c, h]) => el("th", {class: c}, h))), auditRows(results));
}
// The last reads and changes of one object on its page; nothing (not an error) for a user without AuditRead.
export async function whoTouched(repo, path) {
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
export function auditLink(repo, path, text, id) { return el("a", {id, href: "#" + route("r", repo, "audit") + "?path=" + enc(path)}, text); }
// A from/to field's value (datetime-local, read as UTC) in seconds since the epoch; "to" covers its whole minute.
export function utcSeconds(value, end) {
  if (!value) return undefined;
  const t = Date.parse(value + (value.length === 16 ? ":00" : "") + "Z");
  if (isNaN(t)) throw new Error(`not a time: ${value}`);
  return Math.floor(t / 1000) + (end && value.length === 16 ? 59 : 0);
}
export const AUDIT_FIELDS = ["ref", "path", "user", "op", "from", "to"];
// The operation filter's choices come from the server's list of what the trail records (listAuditOperations,
// lakemount/audit/operations.py): every write at once, every read, or one operation, grouped by front end.
export function operationSelect(ops, chosen) {
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
export async function auditPage(repo, q) {
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
