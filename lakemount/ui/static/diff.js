// lakemount web UI: what changed inside an object, and who changed it last. A module importing core.js's helpers
// (el, api, route, link, fmtTime, action): every value from the server is inserted as text. diffToggle() gives a
// changed row of a compare, commit or pull request page its "diff" button, which opens the object's diff below the
// row: a line diff (unified or side by side), a table diff of CSV and Parquet (schema changes, counts, the changed
// rows, by a key column the user picks or by whole row, a page at a time), or both versions of an image side by
// side. fillBlame() fills the "last change" cells of a listing, and the object page's line, with one request for the
// whole page.

import {api, el, errorBox, fmtSize, fmtTime, link, route} from "./core.js";

export const DIFF_ROWS = 50;  // changed rows of a table diff per page

// cmp: {left, right, type} as the page's diff was asked (type: two_dot, three_dot or uncommitted).
export function diffBase(repo, cmp) { return route("repositories", repo, "refs", cmp.left, "diff", cmp.right, "object"); }

export function diffToggle(repo, cmp, path) {
  const id = "diff-" + Math.random().toString(36).slice(2);
  const button = el("button", {type: "button", class: "diff-toggle", "aria-expanded": "false", "aria-controls": id,
    "data-path": path, onclick: async () => {
      const row = button.closest("tr");
      const open = row.nextElementSibling && row.nextElementSibling.classList.contains("object-diff") ? row.nextElementSibling : null;
      if (open) { open.remove(); button.setAttribute("aria-expanded", "false"); return; }
      const cell = el("td", {colspan: row.children.length});
      row.after(el("tr", {class: "object-diff", id, "data-path": path}, cell));
      button.setAttribute("aria-expanded", "true");
      cell.replaceChildren(el("p", {class: "muted"}, "loading the diff…"));
      try { cell.replaceChildren(await objectDiff(repo, cmp, path)); } catch (e) { cell.replaceChildren(errorBox(e)); }
    }}, "diff");
  return button;
}

export async function objectDiff(repo, cmp, path) {
  const s = await api("GET", diffBase(repo, cmp), {path, type: cmp.type});
  const box = el("div", {class: "diff-view", "data-kind": s.kind});
  const sides = el("p", {class: "muted"}, sideLabel("before", s.left), " → ", sideLabel("after", s.right));
  switch (s.kind) {
    case "text": box.append(sides, await textDiff(repo, cmp, path, "unified")); break;
    case "table": box.append(sides, await tableDiff(repo, cmp, path, [], "")); break;
    case "image": box.append(imageDiff(s, path)); break;
    case "too_large": box.append(sides, el("p", {class: "muted"}, "Too large to show side by side.")); break;
    default: box.append(sides, el("p", {class: "muted"}, "Binary object: no content diff. Download either version to compare."));
  }
  return box;
}

export function sideLabel(what, side) {
  if (!side.exists) return what + ": (absent)";
  return [what + ": ", el("a", {href: side.url, download: ""}, side.ref.length === 64 ? side.ref.slice(0, 12) : side.ref),
    " (" + fmtSize(side.size_bytes) + ")"];
}

// ---- text ---------------------------------------------------------------------------------------
export async function textDiff(repo, cmp, path, view) {
  const d = await api("GET", diffBase(repo, cmp) + "/text", {path, type: cmp.type, view});
  const holder = el("div", {class: "text-diff", "data-view": view});
  const pick = v => el("button", {type: "button", class: "diff-view-pick", "aria-pressed": String(v === view), "data-view": v,
    onclick: async () => holder.replaceWith(await textDiff(repo, cmp, path, v))}, v === "unified" ? "unified" : "side by side");
  holder.append(el("div", {class: "diff-bar"}, pick("unified"), pick("side_by_side"),
    el("span", {class: "counts"}, el("span", {class: "added"}, "+" + d.counts.added), el("span", {class: "removed"}, "−" + d.counts.removed))));
  if (!d.hunks.length) { holder.append(el("p", {class: "muted"}, "No line changed.")); return holder; }
  const num = n => el("td", {class: "ln"}, n === null || n === undefined ? "" : String(n));
  const rows = [];
  for (const h of d.hunks) {
    rows.push(el("tr", {class: "hunk"}, el("td", {colspan: view === "unified" ? 3 : 4},
      `@@ -${h.old_start},${h.old_lines} +${h.new_start},${h.new_lines} @@`)));
    if (view === "unified") {
      for (const l of h.lines) {
        const cls = l.op === "+" ? "line-added" : l.op === "-" ? "line-removed" : "line-same";
        rows.push(el("tr", {class: cls}, num(l.old), num(l.new), el("td", {class: "code"}, el("span", {class: "op", "aria-hidden": "true"}, l.op), l.text)));
      }
    } else {
      for (const r of h.rows) {
        const side = (s, cls) => s ? [num(s.n), el("td", {class: "code " + (r.op === "equal" ? "line-same" : cls)}, s.text)]
                                   : [num(null), el("td", {class: "code empty"})];
        rows.push(el("tr", {class: "pair " + r.op}, side(r.left, "line-removed"), side(r.right, "line-added")));
      }
    }
  }
  holder.append(el("table", {class: "code-diff " + view}, view === "side_by_side"
    ? el("tr", {}, el("th", {colspan: 2}, "before"), el("th", {colspan: 2}, "after")) : null, rows));
  return holder;
}

// ---- tables -------------------------------------------------------------------------------------
// url: the diff's operation (default: diffObjectTable; tables.js passes diffIcebergTableRows, of the same answer).
export async function tableDiff(repo, cmp, path, key, after, url) {
  const at = url || diffBase(repo, cmp) + "/table";
  const d = await api("GET", at, {path, type: cmp.type, key, after, amount: DIFF_ROWS});
  const holder = el("div", {class: "table-diff", "data-mode": d.mode, "data-key": key.join(",")});
  const redo = async (k, a) => holder.replaceWith(await tableDiff(repo, cmp, path, k, a, at).catch(e => errorBox(e)));
  const keyPick = el("select", {class: "key-pick", "aria-label": "match rows by", onchange: ev => redo(ev.target.value ? [ev.target.value] : [], "")},
    el("option", {value: ""}, "whole row"),
    d.columns.map(c => el("option", {value: c, selected: key.length === 1 && key[0] === c}, "key: " + c)));
  const c = d.counts;
  holder.append(el("div", {class: "diff-bar"}, el("label", {}, "Match rows by ", keyPick),
    el("span", {class: "counts table-counts"}, el("span", {class: "added"}, c.added + " added"), el("span", {class: "removed"}, c.removed + " removed"),
      d.mode === "key" ? el("span", {class: "changed"}, c.changed + " changed") : null, el("span", {class: "muted"}, c.unchanged + " unchanged")),
    el("span", {class: "muted"}, `${d.left.exists ? d.left.num_rows : 0} → ${d.right.exists ? d.right.num_rows : 0} rows`)));
  const sc = d.schema;
  if (sc.added.length || sc.dropped.length || sc.retyped.length) {
    holder.append(el("ul", {class: "schema-changes"},
      sc.added.map(f => el("li", {class: "added"}, "column added: ", el("code", {}, f.name), " " + f.type)),
      sc.dropped.map(f => el("li", {class: "removed"}, "column dropped: ", el("code", {}, f.name), " " + f.type)),
      sc.retyped.map(f => el("li", {class: "changed"}, "column retyped: ", el("code", {}, f.name), ` ${f.left_type} → ${f.right_type}`))));
  }
  if (!d.results.length) { holder.append(el("p", {class: "muted"}, after ? "No more rows." : "No row changed.")); return holder; }
  const cell = v => v === null || v === undefined ? el("span", {class: "muted"}, "null") : typeof v === "object" ? JSON.stringify(v) : String(v);
  const body = [];
  for (const r of d.results) {
    const mark = r.type === "added" ? "+" : r.type === "removed" ? "−" : "~";
    const extra = d.mode === "row_hash" && r.count > 1 ? " ×" + r.count : "";
    if (r.type === "changed") {
      const changed = new Set(r.changed_columns);
      body.push(el("tr", {class: "row-changed before"}, el("td", {rowspan: 2, class: "changed"}, mark),
        d.columns.map((n, i) => el("td", {class: changed.has(n) ? "cell-removed" : ""}, cell(r.left[i])))));
      body.push(el("tr", {class: "row-changed after"}, d.columns.map((n, i) => el("td", {class: changed.has(n) ? "cell-added" : ""}, cell(r.right[i])))));
    } else {
      const vals = r.type === "added" ? r.right : r.left;
      body.push(el("tr", {class: "row-" + r.type}, el("td", {class: r.type}, mark + extra), vals.map(v => el("td", {}, cell(v)))));
    }
  }
  holder.append(el("table", {class: "rows-diff"}, el("tr", {}, el("th", {}, ""), d.columns.map(n => el("th", {}, n))), body));
  const start = Number(after || 0);
  holder.append(el("div", {class: "pager"},
    start > 0 ? el("button", {type: "button", class: "rows-prev", onclick: () => redo(key, String(Math.max(0, start - DIFF_ROWS)))}, "← previous") : null,
    el("span", {class: "muted"}, `changes ${start + 1}–${start + d.results.length}`),
    d.pagination.has_more ? el("button", {type: "button", class: "rows-next", onclick: () => redo(key, d.pagination.next_offset)}, "next →") : null));
  return holder;
}

// ---- images -------------------------------------------------------------------------------------
export function imageDiff(s, path) {
  const name = path.split("/").pop();
  const side = (what, x) => el("figure", {class: "image-side", "data-side": what},
    x.exists ? el("img", {src: x.url, alt: `${name}, ${what}`}) : el("p", {class: "muted"}, "(absent)"),
    el("figcaption", {}, sideLabel(what, x)));
  return el("div", {class: "image-diff"}, side("before", s.left), side("after", s.right));
}

// ---- blame --------------------------------------------------------------------------------------
// cells: [{path, td}] of one page; one request for all of them. A failure leaves the cells saying so, the page stands.
export async function fillBlame(repo, ref, cells) {
  if (!cells.length) return;
  let data;
  try {
    data = await api("POST", route("repositories", repo, "refs", ref, "blame"), {}, {paths: cells.map(c => c.path)});
  } catch (e) {
    if (e.status === 401) throw e;
    for (const c of cells) c.td.replaceChildren(el("span", {class: "muted", title: e.message}, "?"));
    return;
  }
  data.results.forEach((b, i) => cells[i].td.replaceChildren(blameText(repo, b)));
}

export function blameText(repo, b) {
  const parts = [];
  if (b.commit) {
    const c = b.commit;
    const first = (c.message || "").split("\n")[0];
    parts.push(link(route("r", repo, "commit", c.id), el("code", {}, c.id.slice(0, 8))), " ",
      el("span", {class: "blame-message", title: c.message}, first.length > 60 ? first.slice(0, 59) + "…" : first), " · ",
      el("span", {class: "blame-author"}, c.committer), " · ", fmtTime(c.creation_date));
  } else {
    parts.push(el("span", {class: "muted"}, b.beyond_depth ? "older than the last 1000 commits" : "not committed"));
  }
  if (b.uncommitted) parts.push(" ", el("span", {class: "changed uncommitted"}, "(changed, uncommitted)"));
  return el("span", {class: "blame", "data-commit": b.commit ? b.commit.id : ""}, parts);
}
