// lakemount web UI: the live feed page, a repository's events as the server sends them (server-sent events).

import {draw, el, fmtTime, gen, subscribe} from "./core.js";
import {defaultBranch, repoCrumb, repoTabs} from "./nav.js";

export function describe(kind, d) {
  const skip = new Set(["id", "repository", "branch", "kind", "time"]);
  return Object.entries(d).filter(([k]) => !skip.has(k)).map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v)).join(" ");
}

export async function feedPage(repo) {
  const g0 = gen;  // drawn only if the user is still on this page
  const body = el("tbody", {});
  const status = el("span", {class: "muted", id: "feed-status"}, "connecting…");
  const ref = await defaultBranch(repo);
  const crumbs = await repoCrumb(repo, ref);
  if (g0 !== gen) return;  // the user moved on: no stream for a page not shown
  draw(g0, el("h2", {}, repo), repoTabs(repo, ref), crumbs, el("h3", {}, "Live feed ", status),
    el("table", {id: "feed"}, el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "time"), el("th", {}, "event"),
      el("th", {}, "branch"), el("th", {}, "details"))), body));
  const es = subscribe(repo, (kind, d, eventId) => {
    body.prepend(el("tr", {class: "event", "data-kind": kind}, el("td", {}, eventId), el("td", {}, fmtTime(d.time)),
      el("td", {}, kind), el("td", {}, d.branch || ""), el("td", {}, describe(kind, d))));
  });
  // The server answers each poll with what is new and closes; EventSource reconnects (retry: 1000 ms)
  // with Last-Event-ID, so an error while it reconnects is the normal rhythm, not an outage. No open within
  // FEED_GRACE ms of an error is one (the server stopped or restarts): the page said "live" all along.
  let outage = null;
  es.onopen = () => { clearTimeout(outage); outage = null; status.replaceChildren("live"); };
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) { clearTimeout(outage); status.replaceChildren("disconnected"); return; }
    if (outage === null) outage = setTimeout(() => { if (es.readyState !== EventSource.OPEN) status.replaceChildren("reconnecting…"); }, FEED_GRACE);
  };
}
export const FEED_GRACE = 3000;
