// Vigil's dashboard: small enhancements only; every page works without them.
"use strict";
document.addEventListener("click", (e) => {
  const b = e.target instanceof Element ? e.target.closest("[data-copy]") : null;
  if (!b) return;
  const source = document.getElementById(b.getAttribute("data-copy") || "");
  const text = source ? source.textContent.trim() : "";
  if (!text || !navigator.clipboard) return;
  navigator.clipboard.writeText(text).then(() => {
    const was = b.textContent;
    b.textContent = "Copied";
    setTimeout(() => (b.textContent = was), 2000);
  });
});
// <form data-confirm="Revoke this key?">: asks before sending
document.addEventListener("submit", (e) => {
  const f = e.target;
  if (f instanceof HTMLFormElement && f.dataset.confirm && !window.confirm(f.dataset.confirm))
    e.preventDefault();
});
// <time datetime="…" data-local>: shown in the reader's time zone
for (const t of document.querySelectorAll("time[data-local]")) {
  const d = new Date(t.getAttribute("datetime") || "");
  if (!Number.isNaN(d.getTime())) {
    t.title = t.getAttribute("datetime");
    t.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  }
}
