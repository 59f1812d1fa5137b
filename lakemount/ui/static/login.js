// lakemount web UI: the login page (an access key for a session cookie) and logging out.

import {api, el, errorBox, show} from "./core.js";

// ---- login ---------------------------------------------------------------------
export function loginPage() {
  document.getElementById("nav").replaceChildren();
  document.getElementById("who").replaceChildren();
  const msg = el("div");
  const id = el("input", {id: "access_key_id", name: "access_key_id", autocomplete: "username", required: true});
  const secret = el("input", {id: "secret_access_key", name: "secret_access_key", type: "password",
                              autocomplete: "current-password", required: true});
  const form = el("form", {class: "login", id: "login-form", onsubmit: async ev => {
    ev.preventDefault();
    msg.replaceChildren();
    try {
      await api("POST", "/auth/login", {}, {access_key_id: id.value.trim(), secret_access_key: secret.value});
      location.assign("/" + (location.hash || "#/"));  // back to the page that asked for the login
    } catch (e) { msg.replaceChildren(errorBox(e.status === 401 ? "wrong access key or secret" : e)); }
  }},
    el("h2", {}, "Log in to lakemount"),
    el("label", {for: "access_key_id"}, "Access key ID"), id,
    el("label", {for: "secret_access_key"}, "Secret access key"), secret,
    el("button", {type: "submit", id: "login"}, "Log in"), msg);
  show(form);
}

export async function logout() {
  try { await api("POST", "/auth/logout"); } finally { location.assign("/login"); }
}
