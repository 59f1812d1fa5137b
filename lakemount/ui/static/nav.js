// lakemount web UI: what every repository page shows around its content (the ref picker, the breadcrumb, the
// tabs) and the caller's rights there (rights(), mayNot(): controls the caller may not use are disabled, with the
// reason as their tooltip).

import {api, el, link, me, route} from "./core.js";
import {treeHash} from "./tree.js";

// ---- ref picker ----------------------------------------------------------------
export async function refPicker(repo, ref, go, id = "ref-picker") {
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
export async function breadcrumb(repo, ref, path, go) {
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
export function repoCrumb(repo, ref) { return breadcrumb(repo, ref, "", r => location.assign("#" + route("r", repo, "tree", r))); }

// The repository's default branch: the ref of the tabs on its repository-wide pages (pulls, feed, hook runs, settings).
export async function defaultBranch(repo) { return (await api("GET", route("repositories", repo))).default_branch; }

// What the user may do in a repository, as the server decides it (getRepositoryPermissions: ReadRepo, WriteRepo,
// DeleteRepo). A control the user may not use is disabled with the reason as its tooltip, instead of a button
// whose click ends in "insufficient permissions". Unknown (the request failed): every control stays enabled,
// and the server still refuses what it refuses.
export async function rights(repo) {
  try { return (await api("GET", route("repositories", repo, "permissions"))).actions; }
  catch (e) { if (e.status === 401) throw e; return null; }
}
export function mayNot(node, can, action) {
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
export function ownPull(button, p) {
  if (!me || me.id !== p.author) return button;
  const why = "Authors cannot approve their own pull request: another user approves it";
  button.disabled = true;
  button.setAttribute("title", why);
  button.dataset.needs = "another user";
  button.classList.add("no-rights");
  return button;
}

export function repoTabs(repo, ref) {
  return el("div", {class: "tabs"},
    link(route("r", repo, "tree", ref), "objects"), link(route("r", repo, "tables", ref), "tables"), link(route("r", repo, "commits", ref), "commits"),
    link(route("r", repo, "refs", ref), "branches & tags"), link(route("r", repo, "changes", ref), "uncommitted"),
    link(route("r", repo, "compare", ref, ref), "compare"), link(route("r", repo, "pulls"), "pull requests"),
    link(route("r", repo, "actions"), "hook runs"), link(route("r", repo, "feed"), "live feed"),
    link(route("r", repo, "audit"), "audit"), link(route("r", repo, "settings"), "protection & GC"));
}
