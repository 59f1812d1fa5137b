// lakemount web UI: pull requests: the list, opening one, and one's page (its changes, comments, approvals,
// hook runs, merge).

import {diffTable} from "./commits.js";
import {API, api, draw, el, errorBox, fmtTime, gen, link, PAGE, pager, route, subscribe} from "./core.js";
import {defaultBranch, mayNot, ownPull, repoCrumb, repoTabs, rights} from "./nav.js";

// ---- pull requests -------------------------------------------------------------
export async function pullsPage(repo, q) {
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

export function conflictList(message) {
  const m = /^(?:conflict found: )?merge conflict on \d+ path\(s\): (.*)$/.exec(message || "");
  if (!m) return null;
  return el("ul", {id: "conflicts"}, m[1].split(", ").map(p => el("li", {}, p)));
}

// A hook's output is served as application/octet-stream (as lakeFS does): a plain link only downloaded a file
// named "output". A click shows it under the link (again: hides it); the link still downloads it, as <id>.log.
export function hookOutput(repo, runId, h) {
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

export async function runsTable(repo, query) {
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

export async function pullPage(repo, id) {
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
