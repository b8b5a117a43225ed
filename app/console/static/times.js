// Every time a page of the console shows is a <time> element whose datetime is the UTC
// moment and whose text is that moment in UTC (app/console/times.py): this writes the text
// again in the browser's own time zone, with the zone's name, and leaves the UTC time in
// the title, shown on hover (docs/console.md, "Times"). Rows the board's script adds are
// written too. Without this script the UTC time stays, saying that it is UTC.
"use strict";
(function () {
  const shown = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
    timeZoneName: "short"});

  function local(element) {
    if (element.dataset.local === element.dateTime) return;
    const moment = new Date(element.dateTime);
    if (Number.isNaN(moment.getTime())) return;
    element.textContent = shown.format(moment);
    element.dataset.local = element.dateTime;
  }

  function within(node) {
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    if (node.matches("time[datetime]")) local(node);
    node.querySelectorAll("time[datetime]").forEach(local);
  }

  within(document.documentElement);
  new MutationObserver((changes) => changes.forEach((change) =>
    change.addedNodes.forEach(within))).observe(document.body, {childList: true, subtree: true});
})();
