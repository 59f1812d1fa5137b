// lakemount web UI: administration: users, groups, access keys and policies (for a user with ManageUsers).

import {api, draw, el, errorBox, fmtTime, gen, link, route} from "./core.js";

// ---- administration: users, groups, access keys, policies ---------------------------
export async function usersPage() {
  const g0 = gen;  // drawn only if the user is still on this page
  const users = await api("GET", "/auth/users", {amount: 1000});
  const msg = el("div");
  const run = fn => async ev => {
    if (ev) ev.preventDefault();
    try { await fn(); await usersPage(); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const name = el("input", {id: "new-user", placeholder: "user id", required: true});
  draw(g0, el("h2", {}, "Users"), msg,
    el("table", {id: "users"}, el("tr", {}, el("th", {}, "user"), el("th", {}, "created"), el("th", {}, "")),
      users.results.map(u => el("tr", {}, el("td", {}, link(route("admin", "users", u.id), u.id)), el("td", {}, fmtTime(u.creation_date)),
        el("td", {}, el("button", {onclick: run(() => confirm("Delete user " + u.id + "?") ? api("DELETE", route("auth", "users", u.id)) : null)}, "delete"))))),
    el("form", {class: "inline", id: "create-user", onsubmit: run(() => api("POST", "/auth/users", {}, {id: name.value.trim()}))},
      name, el("button", {type: "submit"}, "create user")),
    el("p", {}, link(route("admin", "groups"), "groups"), " ", link(route("admin", "policies"), "policies")));
}

export async function userPage(id) {
  const g0 = gen;  // drawn only if the user is still on this page
  // A user without ManageUsers may still see their own page (ManageOwnCredentials: keys, their policies and groups)
  // but not every policy and group: their page is the keys and what they have, without the admin's forms.
  const unlessForbidden = p => p.catch(e => { if (e.status === 403) return null; throw e; });
  const [keys, attached, policies, mine, groups] = await Promise.all([
    api("GET", route("auth", "users", id, "credentials"), {amount: 1000}),
    api("GET", route("auth", "users", id, "policies"), {amount: 1000}),
    unlessForbidden(api("GET", "/auth/policies", {amount: 1000})),
    api("GET", route("auth", "users", id, "groups"), {amount: 1000}),
    unlessForbidden(api("GET", "/auth/groups", {amount: 1000}))]);
  const manage = policies !== null && groups !== null;
  const msg = el("div", {id: "admin-message"});
  const run = fn => async ev => {
    if (ev) ev.preventDefault();
    try { const r = await fn(); await userPage(id); if (r) document.getElementById("admin-message").replaceChildren(r); }
    catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  // A pick-and-add form shows only when there is something left to pick: with an empty list its button sent
  // PUT .../policies/ (answered "no such API path") or did nothing.
  const have = new Set(attached.results.map(p => p.id));
  const pick = el("select", {id: "attach-policy", "aria-label": "policy to attach"}, (policies ? policies.results : []).filter(p => !have.has(p.id)).map(p => el("option", {value: p.id}, p.id)));
  const member = new Set(mine.results.map(g => g.id));
  const pickGroup = el("select", {id: "join-group", "aria-label": "group to join"}, (groups ? groups.results : []).filter(g => !member.has(g.id)).map(g => el("option", {value: g.id}, g.id)));
  draw(g0, el("h2", {}, "User ", id), msg,
    el("h3", {}, "Access keys"),
    el("table", {id: "keys"}, el("tr", {}, el("th", {}, "access key id"), el("th", {}, "created"), el("th", {}, "")),
      keys.results.map(k => el("tr", {}, el("td", {}, k.access_key_id), el("td", {}, fmtTime(k.creation_date)),
        el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "users", id, "credentials", k.access_key_id)))}, "revoke"))))),
    el("button", {id: "create-key", onclick: run(async () => {
      const c = await api("POST", route("auth", "users", id, "credentials"));
      return el("p", {class: "ok"}, "New key ", el("code", {}, c.access_key_id), " secret ", el("code", {id: "new-secret"}, c.secret_access_key),
        " (shown only now)");
    })}, "create access key"),
    el("h3", {}, "Policies"),
    el("table", {id: "user-policies"}, attached.results.map(p => el("tr", {}, el("td", {}, p.id),
      manage ? el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "users", id, "policies", p.id)))}, "detach")) : null))),
    manage && pick.options.length ? el("form", {class: "inline", onsubmit: run(() => api("PUT", route("auth", "users", id, "policies", pick.value)))},
      pick, el("button", {type: "submit"}, "attach")) : null,
    el("h3", {}, "Groups (their policies apply too)"),
    el("table", {id: "user-groups"}, mine.results.map(g => el("tr", {}, el("td", {}, manage ? link(route("admin", "groups", g.id), g.id) : g.id),
      manage ? el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "groups", g.id, "members", id)))}, "leave")) : null))),
    !manage ? el("p", {class: "muted", id: "managed-by-admin"}, "Policies and groups are changed by an administrator.")
      : pickGroup.options.length ? el("form", {class: "inline", onsubmit: run(() => api("PUT", route("auth", "groups", pickGroup.value, "members", id)))},
        pickGroup, el("button", {type: "submit"}, "add to group")) : null);
}

export async function groupsPage() {
  const g0 = gen;  // drawn only if the user is still on this page
  const groups = await api("GET", "/auth/groups", {amount: 1000});
  const msg = el("div");
  const run = fn => async ev => {
    if (ev) ev.preventDefault();
    try { await fn(); await groupsPage(); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const name = el("input", {id: "new-group", placeholder: "group id", required: true});
  const about = el("input", {id: "new-group-description", placeholder: "description"});
  draw(g0, el("h2", {}, "Groups"), msg,
    el("table", {id: "groups"}, el("tr", {}, el("th", {}, "group"), el("th", {}, "description"), el("th", {}, "created"), el("th", {}, "")),
      groups.results.map(g => el("tr", {}, el("td", {}, link(route("admin", "groups", g.id), g.id)), el("td", {}, g.description || ""),
        el("td", {}, fmtTime(g.creation_date)),
        el("td", {}, el("button", {onclick: run(() => confirm("Delete group " + g.id + "?") ? api("DELETE", route("auth", "groups", g.id)) : null)}, "delete"))))),
    el("form", {class: "inline", id: "create-group", onsubmit: run(() => api("POST", "/auth/groups", {}, {id: name.value.trim(), description: about.value}))},
      name, about, el("button", {type: "submit"}, "create group")));
}

export async function groupPage(id) {
  const g0 = gen;  // drawn only if the user is still on this page
  const [group, members, attached, users, policies] = await Promise.all([
    api("GET", route("auth", "groups", id)),
    api("GET", route("auth", "groups", id, "members"), {amount: 1000}),
    api("GET", route("auth", "groups", id, "policies"), {amount: 1000}),
    api("GET", "/auth/users", {amount: 1000}),
    api("GET", "/auth/policies", {amount: 1000})]);
  const msg = el("div");
  const run = fn => async ev => {
    if (ev) ev.preventDefault();
    try { await fn(); await groupPage(id); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const inGroup = new Set(members.results.map(u => u.id));
  const have = new Set(attached.results.map(p => p.id));
  const pickUser = el("select", {id: "add-member", "aria-label": "user to add"}, users.results.filter(u => !inGroup.has(u.id)).map(u => el("option", {value: u.id}, u.id)));
  const pick = el("select", {id: "attach-group-policy", "aria-label": "policy to attach"}, policies.results.filter(p => !have.has(p.id)).map(p => el("option", {value: p.id}, p.id)));
  draw(g0, el("h2", {}, "Group ", id), el("p", {}, group.description || ""), msg,
    el("h3", {}, "Members"),
    el("table", {id: "group-members"}, members.results.map(u => el("tr", {}, el("td", {}, link(route("admin", "users", u.id), u.id)),
      el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "groups", id, "members", u.id)))}, "remove"))))),
    pickUser.options.length ? el("form", {class: "inline", onsubmit: run(() => api("PUT", route("auth", "groups", id, "members", pickUser.value)))},
      pickUser, el("button", {type: "submit"}, "add member")) : null,
    el("h3", {}, "Policies (every member has them)"),
    el("table", {id: "group-policies"}, attached.results.map(p => el("tr", {}, el("td", {}, p.id),
      el("td", {}, el("button", {onclick: run(() => api("DELETE", route("auth", "groups", id, "policies", p.id)))}, "detach"))))),
    pick.options.length ? el("form", {class: "inline", onsubmit: run(() => api("PUT", route("auth", "groups", id, "policies", pick.value)))},
      pick, el("button", {type: "submit"}, "attach")) : null);
}

export async function policiesPage() {
  const g0 = gen;  // drawn only if the user is still on this page
  const policies = await api("GET", "/auth/policies", {amount: 1000});
  draw(g0, el("h2", {}, "Policies"), el("table", {id: "policies"}, el("tr", {}, el("th", {}, "policy"), el("th", {}, "statements")),
    policies.results.map(p => el("tr", {}, el("td", {}, p.id), el("td", {}, el("pre", {}, JSON.stringify(p.statement || [], null, 1)))))));
}
