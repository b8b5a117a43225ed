// Each of the console's forms that writes (method post) is sent once a click: a double click,
// or a second click while the first sending is on its way, sends nothing more (docs/console.md,
// "API keys"). The server tells a form sent twice apart all the same (its form key), for a
// browser without this script and for a page sent again by a reload; this spares it the
// second sending of a double click, and the browser the choice of which answer to show:
// Chromium has been seen to show the first, whose secret the second had replaced.
"use strict";
(function () {
  const SENT_FOR_MS = 5000; // then a form stopped on its way (Esc, a lost network) may go again
  const sentAt = new WeakMap(); // form -> when it was sent (performance.now())

  function posts(form, submitter) {
    const method = (submitter && submitter.getAttribute("formmethod"))
      || form.getAttribute("method") || "get";
    return method.toLowerCase() === "post";
  }

  function release(form) {
    sentAt.delete(form);
    form.removeAttribute("aria-busy");
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (event.defaultPrevented || !(form instanceof HTMLFormElement)
        || !posts(form, event.submitter)) return;
    const now = performance.now();
    if (sentAt.has(form) && now - sentAt.get(form) < SENT_FOR_MS) {
      event.preventDefault();
      return;
    }
    sentAt.set(form, now);
    form.setAttribute("aria-busy", "true"); // console.css shows its buttons at work
    setTimeout(() => { if (sentAt.get(form) === now) release(form); }, SENT_FOR_MS);
  });

  // A page shown again from the back-forward cache keeps its script's state: its forms may
  // be sent again at once.
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) document.querySelectorAll("form[aria-busy]").forEach(release);
  });
})();
