// lakemount web UI: the object browser: a ref's listing (with each entry's last change) and an object's page
// (its metadata and preview).

import {auditLink, whoTouched} from "./audit.js";
import {API, api, draw, el, enc, fmtSize, fmtTime, gen, link, PAGE, pager, route, TABLE_POINTER} from "./core.js";
import {fillBlame} from "./diff.js";
import {importButton, listingEmpty, listingFilter, listingQuery} from "./live.js";
import {breadcrumb, repoTabs} from "./nav.js";
import {tableHash} from "./tables.js";
import {branchWriting} from "./write.js";

// ---- object browser ------------------------------------------------------------
export async function treePage(repo, ref, prefix, q) {
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
  // An Iceberg table is a directory holding its pointer object (lakemount/table_pointers.py TABLE_POINTER): its page links to
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
export function treePrefix(segments) {
  const p = segments.join("/");
  return p && !p.endsWith("/") ? p + "/" : p;
}
export function treeHash(repo, ref, prefix) { return route("r", repo, "tree", ref) + "/" + prefix.split("/").map(enc).join("/"); }
export function objHash(repo, ref, path) { return route("r", repo, "object", ref) + "?path=" + enc(path); }

export function table(schema, rows) {
  return el("table", {class: "preview-table"},
    el("tr", {}, schema.map(c => el("th", {}, c.name, c.type && c.type !== "string" ? el("div", {class: "muted"}, c.type) : null))),
    rows.map(r => el("tr", {}, r.map(v => el("td", {}, v === null ? "null" : typeof v === "object" ? JSON.stringify(v) : v)))));
}

export async function objectPage(repo, ref, q) {
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
