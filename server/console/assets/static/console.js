// outboxd console: the live overview, "select all" on the dead letters,
// and a message page that follows a message until it is sent or dead.
// Everything received is put in place as text, never as HTML.
"use strict";

function liveOverview(section) {
  const live = document.getElementById("live");
  const source = new EventSource("/overview/events");
  source.addEventListener("overview", (event) => {
    const view = JSON.parse(event.data);
    live.textContent = "live";
    live.className = "live";
    document.getElementById("taken").textContent = view.taken;
    const rows = new Map();
    section.querySelectorAll("tr[data-sink]").forEach((tr) => rows.set(tr.dataset.sink, tr));
    const names = (view.rows || []).map((r) => r.sink);
    const changed = names.length !== rows.size || names.some((n) => !rows.has(n));
    if (changed && !section.querySelector("details[open]")) {
      window.location.reload(); // a sink came or went: render its row and forms
      return;
    }
    for (const row of view.rows || []) {
      const tr = rows.get(row.sink);
      if (!tr) continue;
      tr.className = "state-" + row.state;
      tr.querySelectorAll("[data-cell]").forEach((cell) => {
        const text = row.cells[cell.dataset.cell];
        if (text !== undefined) cell.textContent = text;
        cell.classList.toggle("bad", Boolean(row.bad && row.bad[cell.dataset.cell]));
      });
    }
  });
  source.onerror = () => {
    live.textContent = "reconnecting…";
    live.className = "live stale";
  };
}

function selectAll(box) {
  box.addEventListener("change", () => {
    document.querySelectorAll('input[type=checkbox][name=ids]').forEach((c) => { c.checked = box.checked; });
  });
}

function followMessage(status) {
  if (["pending", "in_progress", "failed"].includes(status.textContent.trim())) {
    setTimeout(() => window.location.reload(), 2000);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const overview = document.getElementById("overview");
  if (overview) liveOverview(overview);
  const box = document.getElementById("select-all");
  if (box) selectAll(box);
  const status = document.querySelector(".message #status");
  if (status) followMessage(status);
});
