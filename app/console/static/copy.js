// The copy button of a page that shows a secret once (D35): the console's own script, no
// inline one. Without it (or without a clipboard) the secret is there to select by hand.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const button = document.getElementById("copy");
  if (!button || !navigator.clipboard) return;
  const said = document.getElementById("copied");
  button.hidden = false;
  button.addEventListener("click", async () => {
    const text = document.getElementById(button.dataset.copy).textContent;
    try {
      await navigator.clipboard.writeText(text);
      said.textContent = "Copied.";
    } catch (error) {
      said.textContent = "The browser did not let the page copy it: select it and copy.";
    }
  });
});
