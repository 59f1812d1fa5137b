// lakemount web UI, the pages and controls that change a repository: branches and tags, upload and delete, commit
// and reset, merge. A module importing core.js's and nav.js's helpers (el, api, route, action, mayNot...): the same
// rules hold here, every value from the server is inserted as text and every change sends the CSRF header. Each
// control is disabled, with the reason as its tooltip, for a user without the right (rights() asks
// getRepositoryPermissions).

import {render} from "./app.js";
import {API, api, cookie, draw, el, enc, errorBox, fmtSize, gen, link, main, PAGE, pager, route} from "./core.js";
import {breadcrumb, defaultBranch, mayNot, repoTabs, rights} from "./nav.js";
import {conflictList} from "./pulls.js";

// ---- branches and tags ---------------------------------------------------------------
// Both from any ref: a branch, a tag or a commit id (the datalist offers the names; a typed commit id works too).
export async function refsPage(repo, ref) {
  const g0 = gen;  // drawn only if the user is still on this page
  const [branches, tags, can, crumbs, dflt] = await Promise.all([
    api("GET", route("repositories", repo, "branches"), {amount: 1000}),
    api("GET", route("repositories", repo, "tags"), {amount: 1000}), rights(repo),
    breadcrumb(repo, ref, "", r => location.assign("#" + route("r", repo, "refs", r))), defaultBranch(repo)]);
  const msg = el("div", {id: "refs-message"});
  const run = fn => async ev => {
    if (ev && ev.preventDefault) ev.preventDefault();
    msg.replaceChildren();
    try { await fn(); await refsPage(repo, ref); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const refs = el("datalist", {id: "ref-names"}, [...branches.results, ...tags.results].map(r => el("option", {value: r.id})));
  const newBranch = el("input", {id: "new-branch", placeholder: "new branch name", required: true});
  const branchFrom = el("input", {id: "new-branch-source", list: "ref-names", value: ref, placeholder: "from ref", required: true});
  const newTag = el("input", {id: "new-tag", placeholder: "new tag name", required: true});
  const tagFrom = el("input", {id: "new-tag-source", list: "ref-names", value: ref, placeholder: "at ref", required: true});
  // A branch's row leads to its merge: the compare page of the default branch against it has the merge form.
  const row = (kind, r, del) => el("tr", {class: kind, "data-name": r.id},
    el("td", {}, link(route("r", repo, "tree", r.id), r.id)), el("td", {}, link(route("r", repo, "commit", r.commit_id), r.commit_id.slice(0, 12))),
    el("td", {}, kind === "branch" && r.id !== dflt ? el("a", {href: "#" + route("r", repo, "compare", dflt, r.id), class: "merge-link"},
      "compare & merge into " + dflt) : null),
    el("td", {}, mayNot(el("button", {class: "delete-" + kind, onclick: run(() => confirm(`Delete ${kind} ${r.id}?`) ? del(r.id) : null)}, "delete"), can, "WriteRepo")));
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), crumbs, refs, msg,
    el("h3", {}, "Branches"),
    mayNot(el("form", {class: "inline", id: "create-branch", onsubmit: run(() => api("POST", route("repositories", repo, "branches"), {},
      {name: newBranch.value.trim(), source: branchFrom.value.trim()}))}, newBranch, " from ", branchFrom,
      el("button", {type: "submit"}, "create branch")), can, "WriteRepo"),
    el("table", {id: "branches"}, el("tr", {}, el("th", {}, "branch"), el("th", {}, "head"), el("th", {}, ""), el("th", {}, "")),
      branches.results.map(b => row("branch", b, id => api("DELETE", route("repositories", repo, "branches", id))))),
    el("h3", {}, "Tags"),
    mayNot(el("form", {class: "inline", id: "create-tag", onsubmit: run(() => api("POST", route("repositories", repo, "tags"), {},
      {id: newTag.value.trim(), ref: tagFrom.value.trim()}))}, newTag, " at ", tagFrom,
      el("button", {type: "submit"}, "create tag")), can, "WriteRepo"),
    tags.results.length ? el("table", {id: "tags"}, el("tr", {}, el("th", {}, "tag"), el("th", {}, "commit"), el("th", {}, ""), el("th", {}, "")),
      tags.results.map(t => row("tag", t, id => api("DELETE", route("repositories", repo, "tags", id))))) : el("p", {class: "muted"}, "No tags."));
}

// ---- upload and delete on a branch's listing -------------------------------------------
// The listing's write controls when ``ref`` is a branch (null for a tag or a commit: they take no change).
export async function branchWriting(repo, ref) {
  const [isBranch, can] = await Promise.all([
    api("GET", route("repositories", repo, "branches", ref)).then(() => true, e => { if (e.status === 401) throw e; return false; }),
    rights(repo)]);
  if (!isBranch) return null;
  return {
    deleteButton: path => mayNot(el("button", {class: "delete-object", "data-path": path, onclick: async () => {
      if (!confirm("Delete " + path + " (an uncommitted change until committed)?")) return;
      try { await api("DELETE", route("repositories", repo, "branches", ref, "objects"), {path}); render(); }
      catch (e) { main().prepend(errorBox(e)); }
    }}, "delete"), can, "WriteRepo"),
    uploadBox: prefix => mayNot(uploadBox(repo, ref, prefix), can, "WriteRepo"),
  };
}

// A file input, and the listing as a drop target: each file is uploaded into the directory shown, with its
// progress and a cancel button (XMLHttpRequest: fetch reports no upload progress). The listing is redrawn when
// the last one ends, so the new objects show; the list of uploads (done, cancelled, failed and why) stays
// through that redraw, for as long as the user stays in that directory.
export let uploadLog = {key: "", list: null};
export function uploadBox(repo, branch, prefix) {
  const key = JSON.stringify([repo, branch, prefix]);
  if (uploadLog.key !== key) uploadLog = {key, list: el("ul", {id: "uploads"})};
  const list = uploadLog.list;
  let running = 0;
  // files: [path under the directory shown, File] pairs.
  const start = files => {
    if (input.disabled) return;  // no right to write: a drop is refused as the input is
    for (const [rel, f] of files) {
      running++;
      uploadOne(repo, branch, prefix + rel, f, list).finally(() => { if (--running === 0 && list.isConnected) render(); });
    }
  };
  const input = el("input", {type: "file", id: "upload-input", multiple: true, onchange: () => {
    start([...input.files].map(f => [f.name, f])); input.value = "";
  }});
  // A folder keeps its layout: each file goes to prefix + its path inside the picked folder (named too).
  const folder = el("input", {type: "file", id: "upload-folder", webkitdirectory: true, onchange: () => {
    start([...folder.files].map(f => [f.webkitRelativePath || f.name, f])); folder.value = "";
  }});
  const box = el("div", {id: "upload", class: "upload"},
    el("label", {for: "upload-input"}, "Upload files to ", el("code", {}, "/" + prefix), ": "), input,
    el("label", {for: "upload-folder"}, " a folder: "), folder,
    el("span", {class: "muted"}, " or drop files and folders on the listing"), list);
  // The listing is drawn after this box: the drop handlers go on it once it is in the page.
  queueMicrotask(() => {
    const target = document.getElementById("listing");
    if (!target) return;
    target.addEventListener("dragover", ev => { ev.preventDefault(); target.classList.add("drop"); });
    target.addEventListener("dragleave", () => target.classList.remove("drop"));
    target.addEventListener("drop", ev => {
      ev.preventDefault();
      target.classList.remove("drop");
      if (ev.dataTransfer && !input.disabled) droppedFiles(ev.dataTransfer).then(start, e => list.appendChild(el("li", {}, errorBox(e))));
    });
  });
  return box;
}

// What a drop holds, as [relative path, File] pairs: a dropped folder is walked (its entries are read in
// batches until an empty one). The entries are taken at once: a DataTransfer is emptied after the event.
export async function droppedFiles(dt) {
  const entries = [...(dt.items || [])].filter(i => i.kind === "file").map(i => i.webkitGetAsEntry ? i.webkitGetAsEntry() : null);
  const files = [...dt.files];
  if (!entries.length || entries.some(e => !e)) return files.map(f => [f.name, f]);
  const out = [];
  const walk = async (entry, dir) => {
    if (entry.isFile) { out.push([dir + entry.name, await new Promise((ok, no) => entry.file(ok, no))]); return; }
    const reader = entry.createReader();
    for (;;) {
      const batch = await new Promise((ok, no) => reader.readEntries(ok, no));
      if (!batch.length) return;
      for (const e of batch) await walk(e, dir + entry.name + "/");
    }
  };
  for (const e of entries) await walk(e, "");
  return out;
}

export function uploadOne(repo, branch, path, file, list) {
  return new Promise(resolve => {
    const xhr = new XMLHttpRequest();
    const bar = el("progress", {max: 1, value: 0});
    const state = el("span", {class: "state"}, "uploading");
    const cancel = el("button", {type: "button", class: "cancel-upload", onclick: () => xhr.abort()}, "cancel");
    const item = el("li", {class: "upload-item", "data-path": path}, el("code", {}, path), " ", bar, " ", state, " ", cancel);
    list.appendChild(item);
    const end = (what, cls) => { state.replaceChildren(what); item.dataset.state = cls; cancel.remove(); resolve(); };
    xhr.upload.addEventListener("progress", ev => { if (ev.lengthComputable) bar.value = ev.loaded / ev.total; });
    xhr.addEventListener("load", () => {
      if (xhr.status === 401) { location.assign("/login" + location.hash); return resolve(); }
      if (xhr.status >= 200 && xhr.status < 300) { bar.value = 1; return end("done", "done"); }
      let m = "HTTP " + xhr.status;
      try { m = JSON.parse(xhr.responseText).message || m; } catch (_) { /* not JSON: the status says it */ }
      end(el("span", {class: "error"}, m), "failed");
    });
    xhr.addEventListener("abort", () => end("cancelled", "cancelled"));
    xhr.addEventListener("error", () => end(el("span", {class: "error"}, "network error"), "failed"));
    xhr.open("POST", API + route("repositories", repo, "branches", branch, "objects") + "?path=" + enc(path));
    xhr.setRequestHeader("X-Lakemount-CSRF", cookie("lakemount_csrf"));
    xhr.setRequestHeader("Content-Type", file.type || "application/octet-stream");
    xhr.send(file);
  });
}

// ---- uncommitted changes: commit, reset ------------------------------------------------------
export async function changesPage(repo, branch, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  const [d, can, crumbs] = await Promise.all([
    api("GET", route("repositories", repo, "branches", branch, "diff"), {after, amount: PAGE}), rights(repo),
    breadcrumb(repo, branch, "", r => location.assign("#" + route("r", repo, "changes", r)))]);
  const msg = el("div", {id: "changes-message"});
  // resetBranch: all (type reset), under a prefix (common_prefix) or one object. A button's click and a form's
  // submit are already run one at a time by el() (action()).
  const reset = bodyOf => async () => {
    msg.replaceChildren();
    try { await api("PUT", route("repositories", repo, "branches", branch), {}, bodyOf()); await changesPage(repo, branch, q); }
    catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const message = el("input", {id: "commit-message-input", placeholder: "commit message", size: 50, required: true});
  const meta = el("tbody", {id: "commit-metadata"});
  const addMeta = () => {
    const row = el("tr", {class: "meta-row"},
      el("td", {}, el("input", {class: "meta-key", placeholder: "key", "aria-label": "metadata key"})),
      el("td", {}, el("input", {class: "meta-value", placeholder: "value", "aria-label": "metadata value"})),
      el("td", {}, el("button", {type: "button", class: "meta-remove", onclick: () => row.remove()}, "remove")));
    meta.appendChild(row);
    row.querySelector(".meta-key").focus();
  };
  const commitForm = el("form", {id: "commit-form", onsubmit: async () => {
    msg.replaceChildren();
    const metadata = {};
    for (const r of meta.querySelectorAll("tr")) {
      const k = r.querySelector(".meta-key").value.trim();
      if (k) metadata[k] = r.querySelector(".meta-value").value;
    }
    try {
      const c = await api("POST", route("repositories", repo, "branches", branch, "commits"), {}, {message: message.value, metadata});
      location.assign("#" + route("r", repo, "commit", c.id) + "?branch=" + encodeURIComponent(branch));  // the user stays on the branch
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  }}, el("h3", {}, "Commit"), el("div", {}, message),
    el("table", {class: "metadata"}, el("thead", {}, el("tr", {}, el("th", {}, "metadata key"), el("th", {}, "value"), el("th", {}, ""))), meta),
    el("div", {}, el("button", {type: "button", id: "add-metadata", onclick: addMeta}, "add metadata"), " ",
      el("button", {type: "submit", id: "commit-button"}, "commit")));
  const prefix = el("input", {id: "reset-prefix", placeholder: "prefix, e.g. data/", required: true});
  const rows = d.results.map(c => el("tr", {class: "change " + c.type, "data-path": c.path},
    el("td", {class: c.type}, c.type), el("td", {}, c.path), el("td", {}, fmtSize(c.size_bytes)),
    el("td", {}, mayNot(el("button", {class: "reset-path", onclick: reset(() => ({type: "object", path: c.path}))}, "reset"), can, "WriteRepo"))));
  draw(g0, el("h2", {}, repo), repoTabs(repo, branch), crumbs, el("h3", {}, "Uncommitted changes on ", branch), msg,
    rows.length ? el("table", {id: "changes"}, el("tr", {}, el("th", {}, "change"), el("th", {}, "path"), el("th", {}, "size"), el("th", {}, "")), rows)
      : el("p", {class: "muted", id: "no-changes"}, "No uncommitted changes."),
    pager(d, after, route("r", repo, "changes", branch), q),
    mayNot(el("div", {class: "reset-actions"},
      el("button", {id: "reset-all", onclick: async ev => { if (confirm("Drop every uncommitted change on " + branch + "?")) await reset(() => ({type: "reset"}))(ev); }}, "reset all"), " ",
      el("form", {class: "inline", id: "reset-prefix-form", onsubmit: reset(() => ({type: "common_prefix", path: prefix.value}))},
        "reset under ", prefix, el("button", {type: "submit"}, "reset prefix"))), can, "WriteRepo"),
    mayNot(commitForm, can, "WriteRepo"));
}

// ---- merge ------------------------------------------------------------------------------------
// Merge ``source`` (any ref) into the branch ``dest`` with a strategy; on success, the destination's log.
export function mergeForm(repo, source, dest, can) {
  const strategy = el("select", {id: "compare-merge-strategy", "aria-label": "merge strategy"},
    el("option", {value: ""}, "default (fail on conflict)"),
    el("option", {value: "source-wins"}, "source-wins"), el("option", {value: "dest-wins"}, "dest-wins"));
  const message = el("input", {id: "compare-merge-message", placeholder: "merge message (optional)", size: 30});
  const msg = el("div", {id: "merge-message"});
  return mayNot(el("form", {class: "inline", id: "compare-merge", onsubmit: async () => {
    msg.replaceChildren();
    try {
      await api("POST", route("repositories", repo, "refs", source, "merge", dest), {},
        {strategy: strategy.value || undefined, message: message.value || undefined});
      location.assign("#" + route("r", repo, "commits", dest));
    } catch (e) { msg.replaceChildren(errorBox(e), conflictList(e.message) || ""); }
  }}, "Merge ", el("code", {}, source), " into ", el("code", {}, dest), " ", strategy, message,
    el("button", {type: "submit", id: "compare-merge-button"}, "merge"), msg), can, "WriteRepo");
}
