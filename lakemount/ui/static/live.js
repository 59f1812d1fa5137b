// lakemount web UI, what makes it good to live with: import from storage, the listing's filter and the commit
// search, keyboard shortcuts (and their `?` help), errors that say what to do next. A module importing core.js's and
// nav.js's helpers (el, api, route, action, mayNot, rights...): the same rules hold, every value from the server is
// inserted as text and every change sends the CSRF header; it sets up the keyboard when app.js loads it.

import {render} from "./app.js";
import {action, api, el, errorBox, link, main, route} from "./core.js";
import {defaultBranch, mayNot, rights} from "./nav.js";

// ---- errors that say what to do ------------------------------------------------------
// The server's message says what went wrong; the hint says what the user can do about it, by status.
export function errorHint(e) {
  const status = e && e.status;
  if (status === 403) return "Ask an administrator for the right named above, or use an account that has it.";
  if (status === 404) return "Check the name in the address, or pick another repository, ref or path.";
  if (status === 409) return "Someone changed it meanwhile, or it conflicts: reload the page and try again.";
  if (status === 400 || status === 412 || status === 422) return "Correct the value and try again.";
  if (status === 429 || status === 503) return "The server is busy: wait a moment and try again.";
  if (status >= 500) return "The server failed: try again; if it keeps failing, its log says why.";
  if (e instanceof TypeError) return "The server did not answer: check that it runs and that you are online, then reload.";
  return "";
}

// A page that could not be drawn: its error, its hint and a button that tries the page again.
export function pageError(e) {
  return el("div", {id: "page-error"}, errorBox(e),
    el("p", {}, el("button", {type: "button", id: "retry", onclick: () => render()}, "try again"), " ",
      el("a", {href: "#/"}, "back to the repositories")));
}

// ---- import from storage ---------------------------------------------------------------
// lakeFS's import dialog, through importStart/importStatus/importCancel: sources (one URI a line, a prefix when it
// ends with "/"), a destination prefix, a commit message and metadata; then the import's progress, a cancel
// button, and its commit when done. Disabled, with the reason, without WriteRepo and ImportFromStorage.
export const IMPORT_POLL_MS = 500;
export const CANCELLED = "Import cancelled: nothing was committed; what it had staged stays uncommitted (reset the branch to drop it).";
export function importButton(repo, branch, prefix) {
  const open = el("button", {type: "button", id: "import-open", "aria-haspopup": "dialog",
                             onclick: () => importDialog(repo, branch, prefix)}, "import…");
  const box = el("span", {id: "import-control"}, open);
  rights(repo).then(can => {
    mayNot(box, can, "WriteRepo");
    if (!open.disabled) mayNot(box, can, "ImportFromStorage");
  }).catch(() => {});
  return box;
}

export function importDialog(repo, branch, prefix) {
  const old = document.getElementById("import-dialog");
  if (old) old.remove();
  const base = route("repositories", repo, "branches", branch, "import");
  const sources = el("textarea", {id: "import-sources", rows: 3, cols: 60, required: true, "aria-describedby": "import-sources-help",
                                  placeholder: "s3://bucket/prefix/ or local:///data/dir/"});
  const dest = el("input", {id: "import-destination", value: prefix, size: 40, placeholder: "destination prefix, e.g. imported/"});
  const message = el("input", {id: "import-message", size: 40, required: true, value: "Imported data"});
  const meta = el("textarea", {id: "import-metadata", rows: 2, cols: 40, placeholder: "key=value, one a line"});
  const status = el("div", {id: "import-status", role: "status", "aria-live": "polite"});
  const cancel = el("button", {type: "button", id: "import-cancel", hidden: true}, "cancel import");
  const close = el("button", {type: "button", id: "import-close", onclick: () => dlg.close()}, "close");
  const start = el("button", {type: "submit", id: "import-start"}, "import");
  let running = null;  // the id of the import this dialog started and polls
  const form = el("form", {id: "import-form", onsubmit: async () => {
    // One prefix lands at the destination itself (lakeFS's dialog); an object, or each of several sources, lands
    // under it by its own name (two sources at one place would overlap: the server refuses that).
    const lines = sources.value.split("\n").map(s => s.trim()).filter(Boolean);
    const typed = dest.value.trim();
    const under = typed && !typed.endsWith("/") ? typed + "/" : typed;
    const paths = lines.map(line => {
      const isPrefix = line.endsWith("/");
      const name = line.replace(/\/+$/, "").split("/").pop();
      if (isPrefix) return {type: "common_prefix", path: line, destination: lines.length === 1 ? typed : under + name + "/"};
      return {type: "object", path: line, destination: under + name};
    });
    const metadata = {};
    for (const line of meta.value.split("\n").map(s => s.trim()).filter(Boolean)) {
      const i = line.indexOf("=");
      if (i <= 0) { status.replaceChildren(errorBox(`metadata "${line}" is not key=value`)); return; }
      metadata[line.slice(0, i).trim()] = line.slice(i + 1);
    }
    status.replaceChildren();
    delete status.dataset.state;
    let r;
    try { r = await api("POST", base, {}, {paths, commit: {message: message.value, metadata}}); }
    catch (e) { status.replaceChildren(errorBox(e)); return; }
    poll(r.id);  // not awaited: the form's buttons (cancel among them) are given back now
  }},
    el("h2", {id: "import-title"}, "Import into ", el("code", {}, branch)),
    el("p", {class: "muted", id: "import-sources-help"}, "No data is copied: the branch points at the objects where they are. " +
      "A source ending with / is a prefix, another one object. One prefix replaces the destination prefix; " +
      "an object, or each of several sources, goes under it by its own name."),
    el("label", {for: "import-sources"}, "Import from (one URI a line)"), sources,
    el("label", {for: "import-destination"}, "Destination prefix"), dest,
    el("label", {for: "import-message"}, "Commit message"), message,
    el("label", {for: "import-metadata"}, "Commit metadata"), meta,
    el("div", {class: "dialog-buttons"}, start, " ", cancel, " ", close), status);
  // Polls the import until it ends (done, failed, cancelled) or the dialog stops following it.
  const poll = async id => {
    running = id;
    start.disabled = true;
    cancel.hidden = false;
    const bar = el("progress", {id: "import-progress", "aria-label": "import progress"});  // indeterminate: the count is known at the end
    const said = el("span", {id: "import-state"}, "importing…");
    status.replaceChildren(bar, " ", said);
    const t0 = Date.now();
    const end = (state, ...shown) => { running = null; status.dataset.state = state; status.replaceChildren(...shown); start.disabled = false; cancel.hidden = true; };
    for (;;) {
      await new Promise(ok => setTimeout(ok, IMPORT_POLL_MS));
      if (running !== id) return;  // cancelled here, or the dialog closed
      let s;
      try { s = await api("GET", base, {id}); } catch (e) { return end("failed", errorBox(e)); }
      if (running !== id) return;
      if (s.error && s.error.message === "Canceled") return end("cancelled", el("p", {}, CANCELLED));
      if (s.error) return end("failed", errorBox({status: 400, message: "Import failed: " + s.error.message}));
      if (s.completed) {
        return end("done", el("p", {class: "ok"}, `Imported ${s.ingested_objects} objects into ${branch}`,
          s.commit ? [" as commit ", link(route("r", repo, "commit", s.commit.id), s.commit.id.slice(0, 12))] : null, "."));
      }
      said.replaceChildren(`importing… ${Math.round((Date.now() - t0) / 1000)} s, ${s.ingested_objects || 0} objects so far`);
    }
  };
  cancel.addEventListener("click", action(async () => {
    const id = running;
    if (!id) return;
    try {
      await api("DELETE", base, {id});
      running = null;
      status.dataset.state = "cancelled";
      status.replaceChildren(el("p", {}, CANCELLED));
      start.disabled = false;
      cancel.hidden = true;
    } catch (e) { status.append(errorBox(e)); }
  }));
  const dlg = el("dialog", {id: "import-dialog", "aria-labelledby": "import-title", class: "dialog"}, form);
  // Closing while it runs leaves the import running on the server; the listing is redrawn to show what it did.
  dlg.addEventListener("close", () => { running = null; dlg.remove(); render(); });
  document.body.appendChild(dlg);
  dlg.showModal();
  sources.focus();
}

// ---- the listing's filter and the commit search ------------------------------------------
// Both live in the page's address (?name=... / ?search=...), so a filtered page is a link and the back button
// works; each keystroke (after a pause) replaces the address, and the page redraws keeping the caret.
export const FILTER_PAUSE_MS = 250;
export function searchBox(id, label, value, onChange) {
  let timer = null;
  const input = el("input", {id, type: "search", value: value || "", placeholder: label, "aria-label": label, size: 30,
    oninput: () => { clearTimeout(timer); timer = setTimeout(() => onChange(input.value), FILTER_PAUSE_MS); },
    onkeydown: ev => { if (ev.key === "Enter") { ev.preventDefault(); clearTimeout(timer); onChange(input.value); } }});
  return input;
}
// The hash of the page shown with query parameters changed (empty values dropped, paging reset). It starts from
// the address as it is now, not as it was when a control was drawn: a box ticked on a page still being replaced
// (the filter just typed is redrawing it) must keep that filter, not put back the one the old page was drawn for.
export function withQuery(changes) {
  const [path, query] = location.hash.replace(/^#/, "").split("?", 2);
  const p = new URLSearchParams(query || "");
  p.delete("after"); p.delete("back");
  for (const [k, v] of Object.entries(changes)) { if (v) p.set(k, v); else p.delete(k); }
  const s = p.toString();
  return "#" + (path || "/") + (s ? "?" + s : "");
}
// The listing filter: names in this directory that start with the text (the API's prefix: server-side, paged),
// or, with "whole subtree", every object below whose path from here starts with it.
export function listingFilter(q) {
  const box = searchBox("filter", "filter by name (starts with)", q.get("name"), v => location.replace(withQuery({name: v})));
  const deep = el("input", {type: "checkbox", id: "filter-deep", checked: q.get("deep") === "1",
                            onchange: () => location.replace(withQuery({deep: deep.checked ? "1" : ""}))});
  return el("div", {class: "filter", role: "search"}, box, " ", el("label", {for: "filter-deep"}, deep, " whole subtree"));
}
export function listingQuery(prefix, q) {
  return {prefix: prefix + (q.get("name") || ""), delimiter: q.get("deep") === "1" ? "" : "/"};
}
export function listingEmpty(q) {
  const name = q.get("name");
  if (name) return el("p", {class: "muted", id: "empty"}, `Nothing here starts with "${name}". `,
    el("a", {href: withQuery({name: ""})}, "clear the filter"));
  return el("p", {class: "muted", id: "empty"}, "This directory is empty.");
}
export function commitSearch(q) {
  return el("div", {class: "filter", role: "search"},
    searchBox("commit-search", "search messages, metadata, committer, id", q.get("search"), v => location.replace(withQuery({search: v}))));
}
export function commitsEmpty(q) {
  const s = q.get("search");
  return s ? el("p", {class: "muted", id: "empty"}, `No commit matches "${s}". `, el("a", {href: withQuery({search: ""})}, "clear the search"))
    : el("p", {class: "muted", id: "empty"}, "No commits.");
}

// ---- keyboard ----------------------------------------------------------------------------
// Single keys, as GitHub's and Gmail's: never while typing in a field, never with Ctrl/Alt/Meta.
export const SHORTCUTS = [
  ["?", "show this help"],
  ["/", "focus the page's filter or search box"],
  ["j / k", "next / previous row of the page's table"],
  ["Enter", "open the selected row"],
  ["u", "up one directory (object and listing pages)"],
  ["g then r", "go to the repositories"],
  ["g then o", "go to the objects of this ref"],
  ["g then c", "go to the commits of this ref"],
  ["g then b", "go to the branches and tags"],
  ["g then p", "go to the pull requests"],
  ["g then u", "go to the uncommitted changes"],
  ["i", "import into this branch (a branch's listing)"],
  ["Esc", "close a dialog"],
];
export function helpDialog() {
  const old = document.getElementById("help-dialog");
  if (old) { old.close(); return; }
  const dlg = el("dialog", {id: "help-dialog", class: "dialog", "aria-labelledby": "help-title"},
    el("h2", {id: "help-title"}, "Keyboard shortcuts"),
    el("table", {id: "shortcuts"}, el("thead", {}, el("tr", {}, el("th", {scope: "col"}, "key"), el("th", {scope: "col"}, "does"))),
      el("tbody", {}, SHORTCUTS.map(([k, what]) => el("tr", {}, el("td", {}, el("kbd", {}, k)), el("td", {}, what))))),
    el("div", {class: "dialog-buttons"}, el("button", {type: "button", id: "help-close", onclick: () => dlg.close()}, "close")));
  dlg.addEventListener("close", () => dlg.remove());
  document.body.appendChild(dlg);
  dlg.showModal();
  dlg.querySelector("#help-close").focus();
}
// The repository and ref of the page shown (#/r/<repo>/<view>/<ref>...), for the g-shortcuts.
export function here() {
  const parts = location.hash.replace(/^#/, "").split("?", 1)[0].split("/").filter((p, i) => i > 0).map(s => { try { return decodeURIComponent(s); } catch (_) { return s; } });
  if (parts[0] !== "r" || !parts[1]) return null;
  return {repo: parts[1], view: parts[2] || "", ref: parts.length >= 4 && !["pulls", "feed", "audit", "actions", "settings"].includes(parts[2]) ? parts[3] : ""};
}
// The rows j/k walk: those of the page's main table that hold a link.
export function tableRows() {
  const table = main().querySelector("#listing, #commits, #history, #repos, #branches, #pulls, #diff, #changes, table");
  return table ? [...table.querySelectorAll("tr")].filter(r => r.querySelector("a[href]")) : [];
}
export function selectRow(delta) {
  const rows = tableRows();
  if (!rows.length) return;
  const at = rows.findIndex(r => r.classList.contains("selected"));
  const next = rows[Math.min(rows.length - 1, Math.max(0, at < 0 ? (delta > 0 ? 0 : rows.length - 1) : at + delta))];
  for (const r of rows) { r.classList.remove("selected"); r.removeAttribute("aria-current"); }
  next.classList.add("selected");
  next.setAttribute("aria-current", "true");
  next.querySelector("a[href]").focus();  // focus shows it and makes Enter open it; screen readers read the row's link
}
export let pendingG = 0;  // the time "g" was pressed: a second key within G_WINDOW_MS completes it
export const G_WINDOW_MS = 1500;
export function goTo(key) {
  const h = here();
  const dest = {r: "/"};
  if (h) {
    const ref = h.ref || "";
    const withRef = async view => location.assign("#" + route("r", h.repo, view, ref || await defaultBranch(h.repo)));
    if (key === "o") return withRef("tree");
    if (key === "c") return withRef("commits");
    if (key === "b") return withRef("refs");
    if (key === "u") return withRef("changes");
    if (key === "p") return location.assign("#" + route("r", h.repo, "pulls"));
  }
  if (dest[key]) location.assign("#" + dest[key]);
}
export function onKey(ev) {
  if (ev.ctrlKey || ev.altKey || ev.metaKey || ev.defaultPrevented) return;
  const t = ev.target;
  if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) {
    if (ev.key === "Escape" && t.type === "search" && t.value === "") t.blur();
    return;
  }
  if (document.querySelector("dialog[open]") && ev.key !== "?") return;  // a dialog has the keyboard
  const key = ev.key;
  if (pendingG && Date.now() - pendingG < G_WINDOW_MS) {
    pendingG = 0;
    ev.preventDefault();
    goTo(key);
    return;
  }
  pendingG = 0;
  if (key === "?") { ev.preventDefault(); helpDialog(); }
  else if (key === "/") {
    const box = document.getElementById("filter") || document.getElementById("commit-search") || main().querySelector("input[type=search]");
    if (box) { ev.preventDefault(); box.focus(); box.select(); }
  } else if (key === "j") { ev.preventDefault(); selectRow(1); }
  else if (key === "k") { ev.preventDefault(); selectRow(-1); }
  else if (key === "g") { pendingG = Date.now(); }
  else if (key === "u") {
    // The object page's "up" link; in a listing the breadcrumb's directory above this one (or the ref's root).
    const dirs = [...main().querySelectorAll("#breadcrumb a.dir")];
    const up = document.getElementById("up") || (dirs.length >= 2 ? dirs[dirs.length - 2] : dirs.length ? main().querySelector("#breadcrumb a") : null);
    if (up) { ev.preventDefault(); location.assign(up.href); }
  } else if (key === "i") {
    const b = document.getElementById("import-open");
    if (b && !b.disabled) { ev.preventDefault(); b.click(); }
  }
}
document.addEventListener("keydown", onKey);

// The header's hint that there are shortcuts (a button, so it is reachable without knowing them).
window.addEventListener("DOMContentLoaded", () => {
  const top = document.getElementById("top");
  if (top && !document.getElementById("help-open")) {
    top.appendChild(el("button", {type: "button", id: "help-open", class: "help", title: "keyboard shortcuts (?)",
                                  "aria-label": "keyboard shortcuts", onclick: helpDialog}, "?"));
  }
});
