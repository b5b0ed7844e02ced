// Shoal console: the one script the pages load (the Content-Security-
// Policy allows no other, and nothing inline). It refreshes the regions
// marked data-refresh in place, and asks before a form marked
// data-confirm changes something.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const el of document.querySelectorAll("[data-refresh]")) {
    const url = el.dataset.refresh;
    const every = (Number(el.dataset.every) || 2) * 1000;
    const tick = async () => {
      try {
        const r = await fetch(url, { credentials: "same-origin", headers: { "X-Shoal-Fragment": "1" } });
        if (r.status === 401) {
          location.href = "/login";
          return;
        }
        if (r.ok) {
          // The server escapes every value it renders: the fragment is
          // the page's own HTML, as the first load had it.
          el.innerHTML = await r.text();
        }
      } catch (e) {
        // The console is unreachable for now: try again at the next tick.
      }
      setTimeout(tick, every);
    };
    setTimeout(tick, every);
  }
  for (const f of document.querySelectorAll("form[data-confirm]")) {
    f.addEventListener("submit", (ev) => {
      if (!window.confirm(f.dataset.confirm)) {
        ev.preventDefault();
      }
    });
  }
});
