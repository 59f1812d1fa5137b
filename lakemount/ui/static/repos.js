// lakemount web UI: the repositories page (list, search, create, delete).

import {render} from "./app.js";
import {api, draw, el, enc, errorBox, fmtTime, gen, link, main, PAGE, pager, route} from "./core.js";
import {mayNot, rights} from "./nav.js";

// ---- repositories --------------------------------------------------------------
export async function reposPage(q) {
  const g0 = gen;  // drawn only if the user is still on this page
  const after = q.get("after") || "";
  const data = await api("GET", "/repositories", {after, amount: PAGE});
  const rows = data.results.map(r => el("tr", {},
    el("td", {}, link(route("r", r.id, "tree", r.default_branch), r.id)),
    el("td", {}, r.default_branch), el("td", {}, r.storage_namespace), el("td", {}, fmtTime(r.creation_date)),
    el("td", {}, el("button", {class: "delete-repo", onclick: async () => {
      if (!confirm("Delete repository " + r.id + "?")) return;
      try { await api("DELETE", "/repositories/" + enc(r.id)); render(); } catch (e) { main().prepend(errorBox(e)); }
    }}, "delete"))));
  const name = el("input", {name: "name", placeholder: "name", required: true});
  // Left empty, the namespace is the storage config's default_namespace_prefix + "/" + name, as lakeFS's form fills it.
  const ns = el("input", {name: "storage_namespace", placeholder: "storage namespace (default: under the server's store)", size: 40});
  api("GET", "/config/storage").then(c => {
    if (c.default_namespace_prefix) ns.placeholder = "storage namespace (default: " + c.default_namespace_prefix + "/<name>)";
  }).catch(() => {});
  const branch = el("input", {name: "default_branch", value: "main", size: 10, "aria-label": "default branch"});
  const samples = el("input", {type: "checkbox", name: "sample_data"});
  const msg = el("div");
  const create = el("form", {class: "inline", id: "create-repo", onsubmit: async ev => {
    ev.preventDefault();
    try {
      await api("POST", "/repositories", {}, {name: name.value.trim(), storage_namespace: ns.value.trim(),
                                                default_branch: branch.value.trim() || "main", sample_data: samples.checked});
      render();
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  }}, "New repository: ", name, ns, branch, el("label", {}, samples, " sample data"), el("button", {type: "submit"}, "create"));
  draw(g0, el("h2", {}, "Repositories"), create, msg,
    rows.length ? el("table", {id: "repos"}, el("tr", {}, el("th", {}, "repository"), el("th", {}, "default branch"),
      el("th", {}, "storage namespace"), el("th", {}, "created"), el("th", {}, "")), rows)
      : el("p", {class: "muted"}, "No repositories yet."),
    pager(data, after, "/", q));
  // Each repository's delete button, once its rights are known (after the list is drawn: one request per row
  // must not hold up the first page).
  data.results.forEach((r, i) => rights(r.id).then(can => {
    if (g0 === gen) mayNot(rows[i].querySelector(".delete-repo"), can, "DeleteRepo");
  }).catch(() => {}));
}
