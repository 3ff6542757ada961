// The charts page: draws the last hour with the vendored uPlot from the
// JSON at #charts' data-source, and redraws it every minute. Served as
// /assets/charts.js: the pages run no inline script, as their
// Content-Security-Policy (script-src 'self') asks.
(function () {
  const root = document.getElementById('charts');
  const url = root.dataset.source;
  const width = () => Math.min(1100, root.clientWidth - 20);
  let plots = [];
  function draw(d) {
    plots.forEach(p => p.destroy());
    plots = [];
    const x = d.minutes;
    const make = (id, title, series, data) => {
      const el = document.getElementById(id);
      el.innerHTML = '';
      plots.push(new uPlot({ title, width: width(), height: 220, series: [{}].concat(series) }, [x].concat(data), el));
    };
    make('throughput', 'Jobs per minute', [
      { label: 'succeeded', stroke: '#1a7f37', width: 2 },
      { label: 'failed or retried', stroke: '#c0362c', width: 2 },
    ], [d.succeeded, d.failed]);
    make('latency', 'Mean wait from due to start (s)', [
      { label: 'latency', stroke: '#2f5bd3', width: 2 },
    ], [d.latency]);
    root.dataset.loaded = String(x.length);
  }
  function load() {
    fetch(url, { credentials: 'same-origin' }).then(r => r.json()).then(draw);
  }
  load();
  setInterval(load, 60000);
})();
