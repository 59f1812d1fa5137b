// lakemount web UI: commits, a path's history, one commit's page (its changes, revert) and the compare page (two
// refs' changes, counted, with each changed object's diff).

import {api, draw, el, enc, errorBox, fmtSize, fmtTime, gen, link, PAGE, pager, route} from "./core.js";
import {diffToggle} from "./diff.js";
import {commitSearch, commitsEmpty} from "./live.js";
import {breadcrumb, mayNot, refPicker, repoTabs, rights} from "./nav.js";
import {compareTables} from "./tables.js";
import {mergeForm} from "./write.js";

// ---- commits, history, diffs ---------------------------------------------------
export function commitRows(repo, results) {
  return results.map(c => el("tr", {class: "commit"},
    el("td", {}, link(route("r", repo, "commit", c.id), c.id.slice(0, 12))),
    el("td", {class: "message"}, c.message), el("td", {}, c.committer), el("td", {}, fmtTime(c.creation_date))));
}
export function commitTable(repo, results, id) {
  return el("table", {id}, el("tr", {}, el("th", {}, "commit"), el("th", {}, "message"), el("th", {}, "committer"), el("th", {}, "date")),
    commitRows(repo, results));
}

export async function commitsPage(repo, ref, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  const [data, picker] = await Promise.all([
    api("GET", route("repositories", repo, "refs", ref, "commits"), {after, amount: PAGE, search: q.get("search") || undefined}),
    breadcrumb(repo, ref, "", r => location.assign("#" + route("r", repo, "commits", r)))]);
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), picker, commitSearch(q),
    data.results.length ? commitTable(repo, data.results, "commits") : commitsEmpty(q),
    pager(data, after, route("r", repo, "commits", ref), q, {search: q.get("search") || undefined}));
}

export async function historyPage(repo, ref, q) {
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
export function diffTable(repo, ref, results, cmp) {
  return el("table", {id: "diff"}, el("tr", {}, el("th", {}, "change"), el("th", {}, "path"), el("th", {}, "size"), cmp ? el("th", {}, "content") : null),
    results.map(d => el("tr", {class: "change " + d.type, "data-path": d.path},
      el("td", {class: d.type}, d.type), el("td", {}, d.type === "removed" || !ref ? d.path : link(route("r", repo, "object", ref) + "?path=" + enc(d.path), d.path)),
      el("td", {}, fmtSize(d.size_bytes)),
      cmp ? el("td", {}, d.path_type === "common_prefix" ? null : diffToggle(repo, cmp, d.path)) : null)));
}

export async function commitPage(repo, id, q) {
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
export async function countAll(fetchPage, g0) {
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

export async function comparePage(repo, left, right, q) {
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
