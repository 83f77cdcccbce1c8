// Charts of the connection page, drawn with uPlot (served from the package as the global `uPlot`).
// Each `<div class="chart" data-chart="ID">` reads its data from `<script type="application/json"
// id="ID">` (the CSP runs no inline script; a JSON data block is only read): `t` (Unix seconds),
// `rt` (mean response time in ms, null without checks) and `up` (uptime percent). The chart takes
// the container's width, follows it when it changes, and takes its colours from the page's CSS
// variables, so it follows dark mode, redrawn when the system switches. The data table below the
// chart stays as it is: the chart adds to it, never replaces it.
"use strict";
(() => {
  if (typeof window.uPlot !== "function") return;
  const css = (name, fallback) =>
    getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;

  const ms = (v) => (v === null || v === undefined ? "–" : `${Math.round(v).toLocaleString()} ms`);

  function draw(box, data) {
    const fg = css("--fg", "#1d2330");
    const muted = css("--muted", "#545d6e");
    const line = css("--line", "#d5d9e0");
    const accent = css("--accent", "#2052c9");
    const axis = { stroke: muted, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
    const opts = {
      width: Math.max(200, box.clientWidth),
      height: 220,
      scales: { x: { time: true }, y: { range: (_u, min, max) => [0, Math.max(10, max * 1.1 || 10)] } },
      series: [
        { value: (_u, v) => (v === null ? "–" : new Date(v * 1000).toLocaleString()) },
        {
          label: "Response time",
          stroke: accent,
          width: 2,
          fill: `${accent}22`,
          spanGaps: false,
          // points where the line is too short to see (a new connection, sparse checks)
          points: { show: data.rt.filter((v) => v !== null).length <= 60, size: 5, fill: accent },
          value: (_u, v) => ms(v),
        },
      ],
      axes: [axis, { ...axis, size: 64, values: (_u, vals) => vals.map((v) => `${v} ms`) }],
      legend: { live: true },
    };
    box.textContent = "";
    const chart = new window.uPlot(opts, [data.t, data.rt], box);
    // the legend's text in the page's colour (uPlot's stylesheet assumes a light page)
    for (const el of box.querySelectorAll(".u-legend")) el.style.color = fg;
    return chart;
  }

  for (const box of document.querySelectorAll(".chart[data-chart]")) {
    const source = document.getElementById(box.getAttribute("data-chart") || "");
    if (!source) continue;
    let data;
    try {
      data = JSON.parse(source.textContent || "{}");
    } catch {
      continue;
    }
    if (!Array.isArray(data.t) || !Array.isArray(data.rt)) continue;
    let chart = draw(box, data);
    // follow the container's width (a phone turned, a window resized)
    if (typeof ResizeObserver === "function") {
      let width = box.clientWidth;
      new ResizeObserver(() => {
        if (box.clientWidth === width) return;
        width = box.clientWidth;
        chart.setSize({ width: Math.max(200, width), height: 220 });
      }).observe(box);
    }
    // the system switched between light and dark: redraw in the new colours
    const dark = window.matchMedia("(prefers-color-scheme: dark)");
    const redraw = () => {
      chart.destroy();
      chart = draw(box, data);
    };
    if (dark.addEventListener) dark.addEventListener("change", redraw);
  }
})();
