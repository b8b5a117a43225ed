// The orders board's live rows (D35): follows the orders changed since the page was shown,
// through the console's own JSON (the session's cookie; the API's feed needs a key), every
// few seconds. A changed row is shown as it is now, with the version its actions carry;
// on the first page of "newest first", a new order that the filters select is added on
// top. Text goes in with textContent only. The board works without this script.
"use strict";
(function () {
  const EVERY_MS = 3000;
  const table = document.getElementById("orders");
  const template = document.getElementById("order-row");
  if (!table || !template) return;
  const live = document.getElementById("live");
  const body = table.tBodies[0];
  const base = table.dataset.act;
  let after = table.dataset.after;
  let added = 0;

  // A moment as the server writes one (app/console/times.py): a <time> with the UTC time as
  // its text and title; times.js writes its text in the browser's zone.
  function moment(text) {
    const element = document.createElement("time");
    element.dateTime = text;
    const utc = new Date(text);
    if (Number.isNaN(utc.getTime())) { element.textContent = text; return element; }
    const iso = utc.toISOString();
    element.title = iso.slice(0, 10) + " " + iso.slice(11, 19) + " UTC";
    element.textContent = iso.slice(0, 10) + " " + iso.slice(11, 16) + " UTC";
    return element;
  }

  function fill(tr, order) {
    tr.id = "order-" + order.id;
    const cell = (name) => tr.querySelector("td." + name);
    // The id links to the order's page (app/console/order_page.py).
    const link = document.createElement("a");
    link.href = base + "/" + order.id;
    link.textContent = String(order.id);
    cell("id").replaceChildren(link);
    cell("pet").textContent = order.petId === undefined ? ""
      : String(order.petId) + (order.petName ? " · " + order.petName : "");
    cell("quantity").textContent = order.quantity === undefined ? "" : String(order.quantity);
    cell("ship-date").replaceChildren(order.shipDate ? moment(order.shipDate) : "");
    cell("status").textContent = order.status;
    cell("complete").textContent = order.complete ? "yes" : "no";
    for (const form of tr.querySelectorAll("form.action")) {
      const action = form.dataset.action;
      if (!order.actions.includes(action)) { form.remove(); continue; }
      form.action = base + "/" + order.id + "/" + action;
      form.querySelector("input[name=version]").value = String(order.version);
    }
    // Cancel: a link to its confirmation page (app/console/confirm.py), with the version.
    for (const link of tr.querySelectorAll("a.action")) {
      if (!order.actions.includes(link.dataset.action)) { link.remove(); continue; }
      link.href = base + "/" + order.id + "/" + link.dataset.action + "?"
        + new URLSearchParams({version: String(order.version), back: table.dataset.back});
    }
  }

  function show(order) {
    const row = template.content.firstElementChild.cloneNode(true);
    fill(row, order);
    const present = document.getElementById("order-" + order.id);
    if (present) {
      row.className = order.selected ? "changed" : "changed unselected";
      present.replaceWith(row);
    } else if (order.selected && table.dataset.live === "prepend") {
      row.className = "new";
      const empty = body.querySelector("tr.empty");
      if (empty) empty.remove();
      body.insertBefore(row, body.firstElementChild);
      added += 1;
      live.hidden = false;
      live.textContent = added + (added === 1 ? " new order" : " new orders") + " since this page was shown.";
    }
  }

  async function follow() {
    try {
      const url = table.dataset.changes + (table.dataset.changes.includes("?") ? "&" : "?")
        + "after=" + encodeURIComponent(after);
      const answer = await fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}});
      // Signed out, or the session ended: the page says so at its next load; stop here.
      if (!answer.ok || !(answer.headers.get("Content-Type") || "").startsWith("application/json")) return;
      const page = await answer.json();
      page.orders.forEach(show);
      after = page.next;
    } catch (error) {
      // The network, or the service restarting: the next round tries again.
    }
    window.setTimeout(follow, EVERY_MS);
  }
  window.setTimeout(follow, EVERY_MS);
})();
