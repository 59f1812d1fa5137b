// lakemount web UI: a repository's hook runs and its settings (branch protection, garbage collection rules).

import {api, draw, el, errorBox, gen, route} from "./core.js";
import {defaultBranch, mayNot, repoCrumb, repoTabs, rights} from "./nav.js";
import {runsTable} from "./pulls.js";

// ---- hook runs, protection -------------------------------------------------------
export async function actionsPage(repo, q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const [ref, runs] = await Promise.all([defaultBranch(repo), runsTable(repo, {branch: q.get("branch") || undefined})]);
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), await repoCrumb(repo, ref), el("h3", {id: "runs-page"}, "Hook runs"), runs);
}

export async function settingsPage(repo) {
  const g0 = gen;  // drawn only if the user is still on this page
  const url = route("repositories", repo, "settings", "branch_protection");
  const [rules, ref, can] = await Promise.all([api("GET", url), defaultBranch(repo), rights(repo)]);
  const msg = el("div");
  const save = async list => {
    try { await api("PUT", url, {}, list); await settingsPage(repo); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const pattern = el("input", {id: "rule-pattern", placeholder: "branch pattern, e.g. main or rel-*", required: true});
  const approvals = el("input", {id: "rule-approvals", type: "number", min: 0, value: 0, size: 4, "aria-label": "required approvals"});
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), await repoCrumb(repo, ref), el("h3", {}, "Branch protection"),
    el("p", {class: "muted"}, "A protected branch changes only by merge (and revert); a merge needs the approvals the rule requires."),
    rules.length ? el("table", {id: "rules"}, el("tr", {}, el("th", {}, "pattern"), el("th", {}, "required approvals"), el("th", {}, "")),
      rules.map((r, i) => el("tr", {}, el("td", {}, r.pattern), el("td", {}, r.required_approvals),
        el("td", {}, mayNot(el("button", {onclick: () => save(rules.filter((_, j) => j !== i))}, "remove"), can, "DeleteRepo"))))) : el("p", {class: "muted"}, "No rules."),
    mayNot(el("form", {class: "inline", id: "add-rule", onsubmit: ev => { ev.preventDefault();
      save([...rules, {pattern: pattern.value.trim(), required_approvals: Number(approvals.value) || 0}]); }},
      pattern, " approvals ", approvals, el("button", {type: "submit"}, "add rule")), can, "DeleteRepo"), msg,
    mayNot(await gcRulesSection(repo), can, "DeleteRepo"));
}

// GC rules: the retention `lakemount gc run` applies (lakeFS's settings/gc_rules).
export async function gcRulesSection(repo) {
  const url = route("repositories", repo, "settings", "gc_rules");
  let rules = null;
  try { rules = await api("GET", url); } catch (e) { if (e.status !== 404) return errorBox(e); }
  const msg = el("div");
  const save = async body => {
    try { await (body ? api("PUT", url, {}, body) : api("DELETE", url)); await settingsPage(repo); }
    catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const current = rules || {default_retention_days: 21, branches: []};
  const days = el("input", {id: "gc-default-days", type: "number", min: 0, value: current.default_retention_days, size: 4, "aria-label": "default retention days"});
  const branch = el("input", {id: "gc-branch", placeholder: "branch"});
  const branchDays = el("input", {id: "gc-branch-days", type: "number", min: 0, value: 90, size: 4, "aria-label": "branch retention days"});
  return el("div", {id: "gc-rules"}, el("h3", {}, "Garbage collection rules"),
    el("p", {class: "muted"}, rules ? "Commits older than these days (and not a branch head or tag) are collected by `lakemount gc run`."
      : "No GC rules: `lakemount gc run` refuses to run until they are set."),
    rules && rules.branches.length ? el("table", {id: "gc-branches"}, el("tr", {}, el("th", {}, "branch"), el("th", {}, "retention days"), el("th", {}, "")),
      rules.branches.map((b, i) => el("tr", {}, el("td", {}, b.branch_id), el("td", {}, b.retention_days),
        el("td", {}, el("button", {onclick: () => save({...current, branches: current.branches.filter((_, j) => j !== i)})}, "remove"))))) : "",
    el("form", {class: "inline", id: "gc-default", onsubmit: ev => { ev.preventDefault();
      save({...current, default_retention_days: Number(days.value) || 0}); }},
      "default retention days ", days, el("button", {type: "submit"}, rules ? "save" : "set rules")),
    el("form", {class: "inline", id: "gc-add-branch", onsubmit: ev => { ev.preventDefault();
      const name = branch.value.trim();
      save({...current, branches: [...current.branches.filter(b => b.branch_id !== name), {branch_id: name, retention_days: Number(branchDays.value) || 0}]}); }},
      branch, " days ", branchDays, el("button", {type: "submit"}, "set branch rule")),
    rules ? el("button", {id: "gc-delete", onclick: () => confirm("Delete the GC rules?") ? save(null) : null}, "delete rules") : "",
    msg);
}
