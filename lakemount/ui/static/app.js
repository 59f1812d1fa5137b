// lakemount web UI: the entry module index.html loads (<script type="module">, no build step). It routes the
// address's hash to one page module (login.js, repos.js, tree.js, commits.js, ...; each imports the helpers it
// uses from core.js and nav.js) and re-renders on every hash change. Every page module keeps the UI's rules:
// values from the server are inserted as text (el()), and every change sends the CSRF header.

import {groupPage, groupsPage, policiesPage, userPage, usersPage} from "./admin.js";
import {auditPage} from "./audit.js";
import {commitPage, commitsPage, comparePage, historyPage} from "./commits.js";
import {api, dec, el, gen, link, loading, me, route, setMe, show, turnPage} from "./core.js";
import {feedPage} from "./feed.js";
import {pageError} from "./live.js";
import {loginPage, logout} from "./login.js";
import {pullPage, pullsPage} from "./pulls.js";
import {reposPage} from "./repos.js";
import {actionsPage, settingsPage} from "./settings.js";
import {tablePage, tablesPage} from "./tables.js";
import {objectPage, treePage, treePrefix} from "./tree.js";
import {changesPage, refsPage} from "./write.js";

// ---- routing -------------------------------------------------------------------
export async function whoami() {
  if (me) {
    // Each page change re-checks, without waiting: another tab may have logged in as someone else (one cookie
    // for all tabs) or out (api() then goes to the login page).
    api("GET", "/user").then(u => { if (u.user.id !== me.id) { setMe(null); whoami().catch(() => {}); } }).catch(() => {});
    return me;
  }
  const u = await api("GET", "/user");
  // Whether this user administers users (ManageUsers): only then the users, groups and policies pages are theirs.
  const admin = await api("GET", "/auth/users", {amount: 1}).then(() => true, e => { if (e.status === 403) return false; throw e; });
  setMe({id: u.user.id, admin});
  const who = document.getElementById("who");
  who.replaceChildren(el("span", {id: "user"}, link(route("admin", "users", u.user.id), u.user.id)), el("button", {id: "logout", onclick: logout}, "log out"));
  document.getElementById("nav").replaceChildren(link("/", "repositories"), ...(admin ? [" ", link(route("admin", "users"), "users"),
    " ", link(route("admin", "groups"), "groups"), " ", link(route("admin", "policies"), "policies")] : []));
  return me;
}

export function render() { return loading(renderPage); }

export async function renderPage() {
  const g0 = turnPage();
  if (location.pathname === "/login") return loginPage();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [pathPart, query] = hash.split("?", 2);
  const q = new URLSearchParams(query || "");
  try {
    const parts = pathPart.split("/").filter((p, i) => i > 0).map(dec);
    await whoami();
    // Pages note ``gen`` when they start: one started after a newer page change would draw over it.
    if (g0 !== gen) return;
    if (parts[0] === "r" && parts.length >= 4) {
      const repo = parts[1], view = parts[2], ref = parts[3];
      if (view === "tree") return await treePage(repo, ref, treePrefix(parts.slice(4)), q);
      if (view === "tables") return await tablesPage(repo, ref);
      if (view === "table") return await tablePage(repo, ref, q);
      if (view === "object") return await objectPage(repo, ref, q);
      if (view === "commits") return await commitsPage(repo, ref, q);
      if (view === "history") return await historyPage(repo, ref, q);
      if (view === "commit") return await commitPage(repo, ref, q);
      if (view === "compare") return await comparePage(repo, ref, parts[4] || ref, q);
      if (view === "pull") return await pullPage(repo, ref);
      if (view === "refs") return await refsPage(repo, ref);
      if (view === "changes") return await changesPage(repo, ref, q);
    }
    if (parts[0] === "r" && parts.length === 3) {
      const repo = parts[1], view = parts[2];
      if (view === "pulls") return await pullsPage(repo, q);
      if (view === "feed") return await feedPage(repo);
      if (view === "audit") return await auditPage(repo, q);
      if (view === "actions") return await actionsPage(repo, q);
      if (view === "settings") return await settingsPage(repo);
    }
    if (parts[0] === "admin") {
      if (parts[1] === "users" && parts[2]) return await userPage(parts[2]);
      if (parts[1] === "users") return await usersPage();
      if (parts[1] === "groups" && parts[2]) return await groupPage(parts[2]);
      if (parts[1] === "groups") return await groupsPage();
      if (parts[1] === "policies") return await policiesPage();
    }
    if (parts.length === 0 || parts[0] === "") return await reposPage(q);
    show(pageError({status: 404, message: "no such page"}));
  } catch (e) {
    if (e.status !== 401 && g0 === gen) show(pageError(e));
  }
}

window.addEventListener("hashchange", render);
window.addEventListener("DOMContentLoaded", render);
