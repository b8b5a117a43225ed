// Each of the console's forms that writes (method post) is sent once a click: a double click,
// or a second click while the first sending is on its way, sends nothing more (docs/console.md,
// "API keys"). The server tells a form sent twice apart all the same (its form key), for a
// browser without this script and for a page sent again by a reload; this spares it the
// second sending of a double click, and the browser the choice of which answer to show:
// Chromium has been seen to show the first, whose secret the second had replaced.
"use strict";
const SENT_FOR_MS = 5000; // then a form stopped on its way (Esc, a lost network) may go again
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.method !== "post") return;
  const sent = Number(form.dataset.sent || 0);
  if (Date.now() - sent < SENT_FOR_MS) {
    event.preventDefault();
    return;
  }
  form.dataset.sent = String(Date.now());
  form.setAttribute("aria-busy", "true");
});
// A page shown again from the back-forward cache keeps its script's state: its forms may be
// sent again at once.
window.addEventListener("pageshow", (event) => {
  if (!event.persisted) return;
  for (const form of document.querySelectorAll("form[data-sent]")) {
    delete form.dataset.sent;
    form.removeAttribute("aria-busy");
  }
});
