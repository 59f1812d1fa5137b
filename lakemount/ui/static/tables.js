// lakemount web UI: Iceberg tables. A module importing the helpers of core.js, nav.js and diff.js (el, api, route,
// link, fmtTime, breadcrumb, repoTabs, tableDiff): every value from the server is inserted as text. tablesPage()
// lists a ref's tables by namespace (listIcebergTables); tablePage() shows one: schema (types, required, version 3
// defaults), partition spec, snapshots (operation and the summary's counts) and its first rows (getIcebergTable,
// previewIcebergTable). compareTables() fills the compare page's "Iceberg tables" section: per table, the snapshots
// added, the schema changes and, where the table is small enough, a row diff drawn by diff.js's table diff
// (diffIcebergTables, diffIcebergTableRows).

import {auditLink, shown} from "./audit.js";
import {api, draw, el, enc, errorBox, fmtTime, gen, link, route} from "./core.js";
import {tableDiff} from "./diff.js";
import {breadcrumb, repoTabs} from "./nav.js";
import {table, treeHash} from "./tree.js";

export const TABLE_ROWS = 100;  // rows of a table's preview

export function tablesHash(repo, ref) { return route("r", repo, "tables", ref); }
export function tableHash(repo, ref, path) { return route("r", repo, "table", ref) + "?path=" + enc(path); }
export const tableName = t => [...t.namespace, t.name].join(".");
export const fmtMs = ms => (ms === null || ms === undefined ? "" : fmtTime(ms / 1000));
export const icebergValue = v => (v === null || v === undefined ? el("span", {class: "muted"}, "null") : typeof v === "object" ? JSON.stringify(v) : String(v));

export async function tablesPage(repo, ref) {
  const g0 = gen;  // drawn only if the user is still on this page
  const [data, crumbs] = await Promise.all([
    api("GET", route("repositories", repo, "refs", ref, "iceberg", "tables")),
    breadcrumb(repo, ref, "", r => location.assign("#" + tablesHash(repo, r)))]);
  const byNs = new Map();
  for (const t of data.results) {
    const ns = t.namespace.join(".");
    if (!byNs.has(ns)) byNs.set(ns, []);
    byNs.get(ns).push(t);
  }
  const sections = [...byNs].map(([ns, tables]) => el("section", {class: "namespace", "data-namespace": ns},
    el("h3", {}, "namespace ", el("code", {}, ns)),
    el("table", {class: "iceberg-tables"},
      el("tr", {}, el("th", {}, "table"), el("th", {}, "format"), el("th", {}, "snapshots"), el("th", {}, "last update"), el("th", {}, "directory")),
      tables.map(t => el("tr", {class: "iceberg-table", "data-path": t.path},
        el("td", {}, link(tableHash(repo, ref, t.path), t.name)),
        t.error ? el("td", {colspan: 3, class: "error table-error"}, "unreadable: " + t.error)
          : [el("td", {}, "v" + t.format_version), el("td", {}, String(t.snapshots)), el("td", {}, fmtMs(t.last_updated_ms))],
        el("td", {}, link(treeHash(repo, ref, t.path), t.path)))))));
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), crumbs, el("h3", {}, "Iceberg tables"),
    sections.length ? el("div", {id: "tables"}, sections)
      : el("p", {class: "muted", id: "no-tables"}, "No Iceberg table at this ref. Tables are made through the Iceberg REST catalog (docs/ICEBERG.md)."),
    data.truncated ? el("p", {class: "muted"}, "Only the first tables are listed.") : null);
}

export function fieldRows(fields) {
  return fields.map(f => el("tr", {class: "field", "data-name": f.name},
    el("td", {}, String(f.id)), el("td", {}, el("code", {}, f.name)), el("td", {}, f.type),
    el("td", {}, f.required ? "required" : "optional"),
    el("td", {}, "initial_default" in f ? icebergValue(f.initial_default) : ""), el("td", {}, "write_default" in f ? icebergValue(f.write_default) : ""),
    el("td", {class: "muted"}, f.doc || "")));
}

export function snapshotRows(snaps) {
  const n = (s, k) => (k in s.counts ? String(s.counts[k]) : "");
  return snaps.map(s => el("tr", {class: "snapshot", "data-id": String(s.snapshot_id)},
    el("td", {}, el("code", {title: String(s.snapshot_id)}, String(s.snapshot_id))), el("td", {}, fmtMs(s.timestamp_ms)),
    el("td", {class: "operation"}, s.operation), el("td", {}, n(s, "added_data_files")), el("td", {}, n(s, "deleted_data_files")),
    el("td", {}, n(s, "added_records")), el("td", {}, n(s, "deleted_records")), el("td", {}, n(s, "total_records"))));
}
export const SNAPSHOT_HEAD = () => el("tr", {}, el("th", {}, "snapshot"), el("th", {}, "time"), el("th", {}, "operation"),
  el("th", {}, "files added"), el("th", {}, "files removed"), el("th", {}, "records added"), el("th", {}, "records removed"),
  el("th", {}, "records"));

export async function tablePage(repo, ref, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const path = q.get("path") || "";
  const [t, crumbs] = await Promise.all([
    api("GET", route("repositories", repo, "refs", ref, "iceberg", "table"), {path}),
    breadcrumb(repo, ref, path.endsWith("/") ? path : path + "/", r => location.assign("#" + tableHash(repo, r, path)))]);
  const rowsBox = el("div", {id: "table-rows"}, el("p", {class: "muted"}, "loading rows…"));
  const spec = t.partition_spec.fields;
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), crumbs,
    el("h3", {id: "table-name"}, "Iceberg table ", el("strong", {}, tableName(t)), " ", el("span", {class: "muted"}, "format v" + t.format_version)),
    el("p", {class: "muted"}, link(tablesHash(repo, ref), "all tables"), " · ", link(treeHash(repo, ref, t.path), "its files"), " · ",
      auditLink(repo, t.path, "its history (audit)", "table-audit-link")),
    el("h3", {}, "Schema ", el("span", {class: "muted"}, `(id ${t.schema.schema_id}${t.schemas > 1 ? `, ${t.schemas} versions` : ""})`)),
    el("table", {id: "table-schema", class: "schema"},
      el("tr", {}, el("th", {}, "id"), el("th", {}, "column"), el("th", {}, "type"), el("th", {}, "required"),
        el("th", {}, "initial default"), el("th", {}, "write default"), el("th", {}, "doc")), fieldRows(t.schema.fields)),
    el("h3", {}, "Partition spec ", el("span", {class: "muted"}, `(id ${t.partition_spec.spec_id})`)),
    spec.length ? el("table", {id: "table-spec"}, el("tr", {}, el("th", {}, "partition field"), el("th", {}, "transform"), el("th", {}, "source column")),
      spec.map(p => el("tr", {class: "partition-field"}, el("td", {}, el("code", {}, p.name)), el("td", {}, p.transform), el("td", {}, el("code", {}, p.source)))))
      : el("p", {id: "table-spec", class: "muted"}, "Not partitioned."),
    el("h3", {}, "Snapshots ", el("span", {class: "muted"}, `(${t.snapshots.length}, newest first)`)),
    t.snapshots.length ? el("table", {id: "table-snapshots"}, SNAPSHOT_HEAD(), snapshotRows(t.snapshots))
      : el("p", {id: "table-snapshots", class: "muted"}, "No snapshot yet: the table has no rows."),
    el("h3", {}, "Rows"), rowsBox);
  if (g0 !== gen || !t.snapshots.length) { rowsBox.replaceChildren(el("p", {class: "muted"}, "No rows.")); return; }
  try {
    const p = await api("GET", route("repositories", repo, "refs", ref, "iceberg", "table", "rows"), {path, rows: TABLE_ROWS});
    // (replaceChildren would write a null as the text "null": the optional notes are left out instead)
    rowsBox.replaceChildren(...[el("p", {class: "muted"}, `first ${p.rows.length} of ${p.num_rows} rows, from ${p.data_files} data files`),
      p.delete_files ? el("p", {class: "muted"}, `The snapshot has ${p.delete_files} delete files: rows they delete may be shown.`) : null,
      table(p.schema, p.rows), p.message ? el("p", {class: "muted"}, p.message) : null].filter(Boolean));
    rowsBox.querySelector("table").id = "table-preview";
  } catch (e) {
    if (e.status === 401) throw e;
    rowsBox.replaceChildren(errorBox(e));
  }
}

// ---- compare ------------------------------------------------------------------------------------------------
export function schemaChangeList(c) {
  const items = [
    c.added.map(f => el("li", {class: "added"}, "column added: ", el("code", {}, f.name), " " + f.type + (f.required ? " required" : ""),
      "initial_default" in f ? ` (default ${JSON.stringify(f.initial_default)})` : "")),
    c.dropped.map(f => el("li", {class: "removed"}, "column dropped: ", el("code", {}, f.name), " " + f.type)),
    c.renamed.map(f => el("li", {class: "changed"}, "column renamed: ", el("code", {}, f.from), " → ", el("code", {}, f.to))),
    c.retyped.map(f => el("li", {class: "changed"}, "column retyped: ", el("code", {}, f.name), ` ${f.from} → ${f.to}`)),
    c.required.map(f => el("li", {class: "changed"}, "column ", el("code", {}, f.name), f.to ? " made required" : " made optional")),
    c.defaults.map(f => el("li", {class: "changed"}, "column ", el("code", {}, f.name), ` ${f.which.replace("_", " ")}: ${JSON.stringify(f.from)} → ${JSON.stringify(f.to)}`))].flat();
  return items.length ? el("ul", {class: "schema-changes iceberg-schema-changes"}, items) : el("p", {class: "muted"}, "Schema unchanged.");
}

export function tableChange(repo, cmp, t) {
  if (t.error) {
    return el("section", {class: "iceberg-change", "data-status": t.status, "data-path": t.path},
      el("h4", {}, el("span", {class: "removed"}, "unreadable"), " ", el("strong", {}, tableName(t))), errorBox(t.error));
  }
  const base = route("repositories", repo, "refs", cmp.left, "diff", cmp.right, "iceberg", "table", "rows");
  const rowsBox = el("div", {class: "iceberg-row-diff"});
  const button = t.row_diff ? el("button", {type: "button", class: "row-diff-toggle", "aria-expanded": "false", onclick: async () => {
    if (rowsBox.firstChild) { rowsBox.replaceChildren(); button.setAttribute("aria-expanded", "false"); return; }
    button.setAttribute("aria-expanded", "true");
    rowsBox.replaceChildren(el("p", {class: "muted"}, "loading the row diff…"));
    try {
      rowsBox.replaceChildren(await tableDiff(repo, cmp, t.path, [], "", base));
    } catch (e) { rowsBox.replaceChildren(errorBox(e)); }
  }}, "row diff") : el("span", {class: "muted row-diff-refused"}, "No row diff: " + t.row_diff_refused);
  const right = t.right.exists ? link(tableHash(repo, cmp.right, t.path), tableName(t)) : el("strong", {}, tableName(t));
  return el("section", {class: "iceberg-change", "data-status": t.status, "data-path": t.path},
    el("h4", {}, el("span", {class: t.status === "changed" ? "changed" : t.status}, t.status), " ", right,
      el("span", {class: "muted"}, t.left.exists && t.right.exists && t.left.format_version !== t.right.format_version
        ? ` format v${t.left.format_version} → v${t.right.format_version}` : ` format v${(t.right.exists ? t.right : t.left).format_version}`)),
    t.snapshots_added.length ? el("table", {class: "snapshots-added"}, SNAPSHOT_HEAD(), snapshotRows(t.snapshots_added))
      : el("p", {class: "muted"}, "No snapshot added."),
    t.snapshots_removed ? el("p", {class: "muted"}, `${t.snapshots_removed} snapshots of the base are gone (expired or rolled back).`) : null,
    t.status === "changed" ? schemaChangeList(t.schema_changes) : null, el("p", {}, button), rowsBox);
}

// The compare page's section: nothing at all when no Iceberg table differs.
export async function compareTables(holder, repo, cmp) {
  let d;
  try {
    d = await api("GET", route("repositories", repo, "refs", cmp.left, "diff", cmp.right, "iceberg", "tables"), {type: cmp.type});
  } catch (e) {
    if (e.status === 401) throw e;
    holder.replaceChildren(el("h3", {}, "Iceberg tables"), errorBox(e));
    return;
  }
  if (!d.results.length) { holder.replaceChildren(); return; }
  holder.replaceChildren(el("h3", {}, "Iceberg tables ", el("span", {class: "muted"}, `(${d.results.length} changed)`)),
    ...d.results.map(t => tableChange(repo, cmp, t)));
}
