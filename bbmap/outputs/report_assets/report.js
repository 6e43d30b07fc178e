/* bbmap report: the page's script (inlined by bbmap/outputs/report_html.py).
   Reads the JSON in #bbmap-data at once (the function table), inflates #bbmap-detail
   (every function's blocks, ranges and edges, column-wise) after the first paint, and
   #bbmap-pictures (CFG SVGs of the hottest functions) when one is opened.  No network. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("bbmap-data").textContent);
  var F = D.functions;
  var N = F.name.length;
  var TOTAL = D.run.totals.samples;
  var COUNTS = D.run.count_source === "lbr" || D.run.count_source === "inferred";
  var PAGE = 50;  // rows rendered at a time: a sort or a filter re-renders this many
  var BB = (window.BB = { data: D, timings: {}, ready: null });
  var PICTURED = {};
  F.pictured.forEach(function (i) { PICTURED[i] = true; });
  BB.pictured = function (i) { return !!PICTURED[i]; };

  // ------------------------------------------------------------------ formatting
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  // formatters made once: toLocaleString builds one per call (~0.3 ms each)
  var INT = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  var SIG = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 6 });
  var FIXED = {};
  function num(v) {
    if (v === null || v === undefined) return "\u2013";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v !== "number") return esc(v);
    if (Number.isInteger(v)) return INT.format(v);
    return SIG.format(v);
  }
  function fixed(v, d) {
    var f = FIXED[d] || (FIXED[d] = new Intl.NumberFormat("en-US", {
      minimumFractionDigits: d, maximumFractionDigits: d }));
    return f.format(v);
  }
  function hex(v) { return "0x" + v.toString(16); }
  function share(v) { return TOTAL ? fixed((100 * v) / TOTAL, 2) + "%" : "\u2013"; }
  function change(a, b) {
    if (a === 0) return b > 0 ? "new" : "=";
    var p = ((b - a) / a) * 100;
    return (p >= 0 ? "+" : "") + fixed(p, 1) + "%";
  }
  function val(v) {
    if (Array.isArray(v)) return "[" + v.map(num).join(", ") + "]";
    if (v !== null && typeof v === "object") return esc(JSON.stringify(v));
    return num(v);
  }

  // ------------------------------------------------------------------ heat colours
  // the same log scale and ramp as bbmap/outputs/picture.py's HeatScale.fill
  var RAMP = D.heat.ramp.map(function (h) {
    return [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)];
  });
  function roundEven(x) { // Python's round(): halves to even
    var r = Math.round(x);
    if (Math.abs(x % 1) === 0.5 && r % 2 !== 0) r -= 1;
    return r;
  }
  function fill(v, vmax) {
    if (v <= 0 || vmax <= 0) return D.heat.zero;
    var pos = Math.min(Math.log1p(v) / Math.log1p(vmax), 1.0);
    var p = pos * (RAMP.length - 1);
    var i = Math.min(Math.floor(p), RAMP.length - 2);
    var f = p - i, a = RAMP[i], b = RAMP[i + 1], s = "#";
    for (var k = 0; k < 3; k++) {
      var c = roundEven(a[k] + (b[k] - a[k]) * f);
      s += (c < 16 ? "0" : "") + c.toString(16);
    }
    return s;
  }
  function lum(h) {
    var out = 0, w = [0.2126, 0.7152, 0.0722];
    for (var k = 0; k < 3; k++) {
      var c = parseInt(h.slice(1 + 2 * k, 3 + 2 * k), 16) / 255;
      out += w[k] * (c <= 0.04045 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4));
    }
    return out;
  }
  function ink(bg) { return lum(bg) < 0.3 ? "#ffffff" : "#1a1a1a"; }
  BB.fill = fill;

  // ------------------------------------------------------------------ embedded data
  function inflate(id) {
    var b64 = document.getElementById(id).textContent.trim();
    var bin = atob(b64), u8 = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
    var s = new Blob([u8]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(s).text().then(JSON.parse);
  }
  function decodeColumn(col, ptr) {
    var v = col.v, out, i, j;
    if (col.t === "p") return col.lo.map(function (lo, k) { return [lo, col.hi[k] >= 0 ? col.hi[k] : null]; });
    if (col.t === "i") return v;
    if (col.t === "d") {
      out = v.slice();
      for (i = 0; i + 1 < ptr.length; i++)
        for (j = ptr[i] + 1; j < ptr[i + 1]; j++) out[j] += out[j - 1];
      return out;
    }
    var d = col.dict;
    if (col.t === "m") return v.map(function (x) { return x >= 0 ? x : d[-1 - x]; });
    return v.map(function (x) { return x >= 0 ? d[x] : undefined; });
  }
  var DETAIL = null, PICTURES = null;
  function detail() {
    if (!DETAIL) {
      DETAIL = inflate("bbmap-detail").then(function (raw) {
        ["blocks", "ranges", "edges"].forEach(function (part) {
          var p = raw[part];
          p.cols = {};
          p.keys.forEach(function (k) { p.cols[k] = decodeColumn(p.columns[k], p.ptr); });
        });
        return raw;
      });
    }
    return DETAIL;
  }
  function pictures() {
    if (!PICTURES) PICTURES = inflate("bbmap-pictures");
    return PICTURES;
  }
  function rows(det, part, i) { // function i's rows of a part, as annotate's JSON objects
    var p = det[part], out = [];
    for (var j = p.ptr[i]; j < p.ptr[i + 1]; j++) {
      var o = {};
      for (var k = 0; k < p.keys.length; k++) {
        var x = p.cols[p.keys[k]][j];
        if (x !== undefined) o[p.keys[k]] = x;
      }
      out.push(o);
    }
    return out;
  }
  // function i as annotate --format json lists it (the tests compare the two)
  BB.functionJson = function (i) {
    return detail().then(function (det) {
      var o = { name: F.name[i], address: F.address[i], samples: F.samples[i],
                period: F.period[i], count: F.count[i],
                ranges: rows(det, "ranges", i), blocks: rows(det, "blocks", i),
                edges: rows(det, "edges", i) };
      Object.keys(F.extra).forEach(function (k) { if (F.extra[k][i] !== null) o[k] = F.extra[k][i]; });
      return o;
    });
  };

  // ------------------------------------------------------------------ heat strip
  // a function's blocks in address order, each as wide as its bytes, as one CSS gradient
  // with hard stops (cheaper to lay out than a canvas per row); blocks narrower than a
  // pixel of the strip share it, showing the hottest of them
  var STRIP_PX = 180, GRADIENTS = [];
  function gradient(det, i) {
    if (GRADIENTS[i] !== undefined) return GRADIENTS[i];
    var p = det.blocks, a = p.ptr[i], b = p.ptr[i + 1];
    var heat = p.cols[D.heat.metric], size = p.cols.size, addr = p.cols.address;
    var idx = [], total = 0, j;
    for (j = a; j < b; j++) { idx.push(j); total += Math.max(size[j], 1); }
    idx.sort(function (x, y) { return addr[x] - addr[y] || x - y; });
    var vmax = F.heat_max[i], stops = [], x = 0, px = -1, hot = -1, from = 0;
    function flush(to) {
      if (hot < 0) return;
      var c = fill(hot, vmax);
      stops.push(c + " " + from.toFixed(2) + "% " + to.toFixed(2) + "%");
    }
    idx.forEach(function (k) {
      var start = (100 * x) / total;
      x += Math.max(size[k], 1);
      var cell = Math.floor((start / 100) * STRIP_PX);
      if (cell !== px) { flush(start); px = cell; hot = heat[k]; from = start; }
      else hot = Math.max(hot, heat[k]);
    });
    flush(100);
    return (GRADIENTS[i] = stops.length ? "linear-gradient(to right," + stops.join(",") + ")" : "none");
  }
  function stripLabel(i) {
    return F.blocks[i] + " blocks in address order, hottest " + num(F.heat_max[i]) + " " + D.heat.metric;
  }

  // ------------------------------------------------------------------ tables
  // columns: {key, label, num, sort(i) -> value, cell(i) -> html}
  function Table(box, opts) {
    this.box = box; this.opts = opts; this.n = opts.n;
    this.order = []; for (var i = 0; i < this.n; i++) this.order.push(i);
    this.view = this.order; this.shown = PAGE; this.sortKey = null; this.dir = 0;
    var self = this;
    box.innerHTML =
      '<div class="tools"><label>Filter by name <input type="search" class="filter" ' +
      'aria-controls="' + opts.id + '" placeholder="substring, e.g. main"></label>' +
      '<span class="status" role="status"></span></div>' +
      '<table id="' + opts.id + '"><caption>' + opts.caption + '</caption><thead><tr>' +
      opts.columns.map(function (c) {
        return '<th scope="col"' + (c.num ? ' class="num"' : "") + ' data-key="' + c.key + '">' +
          (c.sort ? '<button type="button">' + c.label + "</button>" : c.label) + "</th>";
      }).join("") + "</tr></thead><tbody></tbody></table>" +
      '<button type="button" class="more">Show ' + PAGE + " more</button>";
    this.tbody = box.querySelector("tbody");
    this.status = box.querySelector(".status");
    this.more = box.querySelector(".more");
    box.querySelectorAll("th button").forEach(function (b) {
      b.addEventListener("click", function () { self.sortBy(b.parentNode.dataset.key); });
    });
    box.querySelector(".filter").addEventListener("input", function (e) { self.filter(e.target.value); });
    this.more.addEventListener("click", function () { self.shown += PAGE; self.render(); });
    this.tbody.addEventListener("click", function (e) {
      var tr = e.target.closest("tr.row");
      if (tr) opts.open(+tr.dataset.i);
    });
    this.tbody.addEventListener("keydown", function (e) {
      var tr = e.target.closest("tr.row");
      if (!tr) return;
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); opts.open(+tr.dataset.i); }
      else if (e.key === "ArrowDown" && tr.nextElementSibling) { e.preventDefault(); tr.nextElementSibling.focus(); }
      else if (e.key === "ArrowUp" && tr.previousElementSibling) { e.preventDefault(); tr.previousElementSibling.focus(); }
    });
    this.render();
  }
  Table.prototype.column = function (key) {
    return this.opts.columns.filter(function (c) { return c.key === key; })[0];
  };
  Table.prototype.sortBy = function (key, dir) {
    var c = this.column(key);
    if (dir === undefined) dir = this.sortKey === key ? -this.dir : (c.num ? -1 : 1);
    this.sortKey = key; this.dir = dir;
    var vals = this.keysOf(c);
    this.order.sort(function (a, b) { return (vals[a] - vals[b]) * dir || a - b; });
    var self = this;
    this.box.querySelectorAll("th").forEach(function (th) {
      if (th.dataset.key === key) th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    this.applyFilter();
    this.shown = PAGE;
    self.render();
  };
  // a column's sort keys as numbers, made once (a text column: each row's rank in one
  // sort of the texts), so every later sort compares numbers
  Table.prototype.keysOf = function (c) {
    this.keys = this.keys || {};
    if (this.keys[c.key]) return this.keys[c.key];
    var n = this.n, vals = new Float64Array(n), i;
    if (c.num) for (i = 0; i < n; i++) vals[i] = c.sort(i);
    else {
      var text = new Array(n), idx = new Array(n);
      for (i = 0; i < n; i++) { text[i] = c.sort(i); idx[i] = i; }
      idx.sort(function (a, b) { return text[a] < text[b] ? -1 : text[a] > text[b] ? 1 : 0; });
      for (i = 0; i < n; i++) vals[idx[i]] = i > 0 && text[idx[i]] === text[idx[i - 1]] ? vals[idx[i - 1]] : i;
    }
    return (this.keys[c.key] = vals);
  };
  Table.prototype.filter = function (text) {
    this.text = text.toLowerCase();
    this.applyFilter();
    this.shown = PAGE;
    this.render();
  };
  Table.prototype.applyFilter = function () {
    var t = this.text, name = this.opts.name;
    this.view = t ? this.order.filter(function (i) { return name(i).toLowerCase().indexOf(t) >= 0; }) : this.order;
  };
  Table.prototype.render = function () {
    var cols = this.opts.columns, upto = Math.min(this.shown, this.view.length), html = [];
    for (var r = 0; r < upto; r++) {
      var i = this.view[r];
      html.push('<tr class="row" tabindex="0" data-i="' + i + '" aria-label="open ' +
        esc(this.opts.name(i)) + '">' + cols.map(function (c) {
          return "<td" + (c.num ? ' class="num"' : c.cls ? ' class="' + c.cls + '"' : "") + ">" + c.cell(i) + "</td>";
        }).join("") + "</tr>");
    }
    this.tbody.innerHTML = html.join("");
    this.status.textContent = "showing " + num(upto) + " of " + num(this.view.length) +
      (this.view.length !== this.n ? " matching (" + num(this.n) + " in all)" : "");
    this.more.hidden = upto >= this.view.length;
    if (this.opts.after) this.opts.after(this.tbody);
  };

  var stripsReady = null;
  var fnCols = [
    { key: "rank", label: "#", num: true, sort: function (i) { return i; }, cell: function (i) { return String(i + 1); } },
    { key: "name", label: "function", cls: "name", sort: function (i) { return F.name[i]; },
      cell: function (i) { return '<a href="#fn=' + i + '" tabindex="-1">' + esc(F.name[i]) + "</a>"; } },
    { key: "share", label: "share", num: true, sort: function (i) { return F.samples[i]; }, cell: function (i) { return share(F.samples[i]); } },
    { key: "samples", label: "samples", num: true, sort: function (i) { return F.samples[i]; }, cell: function (i) { return num(F.samples[i]); } },
  ];
  if (COUNTS) fnCols.push({ key: "count", label: D.run.count_source === "inferred" ? "entry count (inferred)" : "entry count",
    num: true, sort: function (i) { return F.count[i]; }, cell: function (i) { return num(F.count[i]); } });
  fnCols.push(
    { key: "blocks", label: "blocks", num: true, sort: function (i) { return F.blocks[i]; }, cell: function (i) { return num(F.blocks[i]); } },
    { key: "edges", label: "edges", num: true, sort: function (i) { return F.edges[i]; }, cell: function (i) { return num(F.edges[i]); } },
    { key: "address", label: "address", num: true, sort: function (i) { return F.address[i]; }, cell: function (i) { return hex(F.address[i]); } },
    { key: "strip", label: "heat by " + esc(D.heat.metric) + ", blocks in address order",
      cell: function (i) {
        return '<span class="strip" role="img" aria-label="' + esc(stripLabel(i)) + '"' +
          (stripsReady ? ' style="background:' + gradient(stripsReady, i) + '"' : "") + "></span>";
      } });

  var t0 = performance.now();
  BB.functions = new Table(document.getElementById("fn-table"), {
    id: "fn-rows", n: N, columns: fnCols, name: function (i) { return F.name[i]; },
    caption: "Functions with samples or counts, hottest first; sort by a column header, " +
      "open a function with Enter or a click",
    open: function (i) { location.hash = "fn=" + i; } });
  BB.timings.table = performance.now() - t0;
  BB.timings.tableShown = performance.now();  // since navigation started

  // ------------------------------------------------------------------ layout table
  var L = D.layout && D.layout.rows, LN = L ? L.name.length : 0, layoutOfFn = {};
  if (L) {
    for (var li = 0; li < LN; li++) if (L.fn[li] >= 0) layoutOfFn[L.fn[li]] = li;
    BB.layout = new Table(document.getElementById("layout-table"), {
      id: "layout-rows", n: LN, name: function (i) { return L.name[i]; },
      caption: "Per function, in the new linker order: Ext-TSP score of the jumps inside it, " +
        "before and after; open one with Enter or a click",
      open: function (i) { if (L.fn[i] >= 0) location.hash = "fn=" + L.fn[i]; },
      columns: [
        { key: "pos", label: "order", num: true, sort: function (i) { return i; }, cell: function (i) { return String(i + 1); } },
        { key: "name", label: "function", cls: "name", sort: function (i) { return L.name[i]; }, cell: function (i) { return esc(L.name[i]); } },
        { key: "hot", label: "hot/all blocks", num: true, sort: function (i) { return L.hot_blocks[i]; }, cell: function (i) { return L.hot_blocks[i] + "/" + L.blocks[i]; } },
        { key: "before", label: "score before", num: true, sort: function (i) { return L.intra_before[i]; }, cell: function (i) { return fixed(L.intra_before[i], 1); } },
        { key: "after", label: "score after", num: true, sort: function (i) { return L.intra_after[i]; }, cell: function (i) { return fixed(L.intra_after[i], 1); } },
        { key: "change", label: "change", num: true, sort: function (i) { return L.intra_before[i] ? (L.intra_after[i] - L.intra_before[i]) / L.intra_before[i] : 0; },
          cell: function (i) { return change(L.intra_before[i], L.intra_after[i]); } },
        { key: "ft", label: "fall-throughs gained", num: true, sort: function (i) { return L.fallthrough_after[i] - L.fallthrough_before[i]; },
          cell: function (i) { return num(L.fallthrough_after[i] - L.fallthrough_before[i]); } },
        { key: "hotb", label: "hot B", num: true, sort: function (i) { return L.hot_bytes[i]; }, cell: function (i) { return num(L.hot_bytes[i]); } },
        { key: "coldb", label: "cold B", num: true, sort: function (i) { return L.cold_bytes[i]; }, cell: function (i) { return num(L.cold_bytes[i]); } }] });
  }

  // ------------------------------------------------------------------ one function
  var view = document.getElementById("function");
  function table(caption, head, body, id) {
    return '<table' + (id ? ' id="' + id + '"' : "") + "><caption>" + caption + "</caption><thead><tr>" +
      head.map(function (h) { return '<th scope="col"' + (h.num ? ' class="num"' : "") + ">" + h.t + "</th>"; }).join("") +
      "</tr></thead><tbody>" + body.join("") + "</tbody></table>";
  }
  function cells(blocks, vmax, metric, sepAfter, coldFrom) {
    return '<div class="cells">' + blocks.map(function (b, k) {
      var bg = fill(b[metric], vmax);
      return (k === sepAfter ? '<span class="sep" aria-hidden="true"></span>' : "") +
        '<span class="cell' + (coldFrom !== undefined && k >= coldFrom ? " cold" : "") +
        '" style="background:' + bg + ";color:" + ink(bg) + '" title="bb ' + b.id + ": " +
        num(b[metric]) + " " + metric + '">' + b.id + "<br>" + num(b[metric]) + "</span>";
    }).join("") + "</div>";
  }
  function heatKey(vmax) {
    var stops = D.heat.ramp.join(",");
    return '<div class="heatkey">' + esc(D.heat.title) + ": 0 (white) " +
      '<span class="ramp" style="background:linear-gradient(to right,' + stops + ')"></span> ' +
      num(vmax) + "</div>";
  }
  var EXTRA_BLOCK = ["id", "address", "size", "flags", "samples", "period", "count"];
  function open(i) {
    if (!(i >= 0 && i < N)) return;
    detail().then(function (det) { return render(det, i); }).then(function () {
      view.hidden = false;
      var h = view.querySelector("h2");
      h.focus();
      view.scrollIntoView();
    });
  }
  function render(det, i) {
    var blocks = rows(det, "blocks", i), edges = rows(det, "edges", i), ranges = rows(det, "ranges", i);
    var metric = D.heat.metric, vmax = F.heat_max[i];
    var byAddr = blocks.slice().sort(function (a, b) { return a.address - b.address; });
    var inferred = D.run.count_source === "inferred";
    var h = ['<h2 tabindex="-1" id="fn-h">' + esc(F.name[i]) + "</h2>",
      '<p><a href="#functions">Back to the table</a></p>',
      '<dl class="facts" id="fn-facts"><dt>address</dt><dd>' + hex(F.address[i]) + "</dd>" +
      "<dt>share</dt><dd>" + share(F.samples[i]) + "</dd><dt>samples</dt><dd>" + num(F.samples[i]) +
      "</dd><dt>period</dt><dd>" + num(F.period[i]) + "</dd>" +
      (COUNTS ? "<dt>entry count" + (inferred ? " (inferred)" : "") + "</dt><dd>" + num(F.count[i]) + "</dd>" : "") +
      "<dt>blocks</dt><dd>" + num(F.blocks[i]) + "</dd><dt>edges</dt><dd>" + num(F.edges[i]) + "</dd>" +
      Object.keys(F.extra).map(function (k) { return "<dt>" + esc(k) + "</dt><dd>" + val(F.extra[k][i]) + "</dd>"; }).join("") +
      "</dl>"];
    if (inferred) {
      var inf = D.run.inference || {};
      h.push('<p class="note">Block and edge counts of this profile are <strong>inferred</strong> from IP ' +
        "samples over the CFG recovered from the binary (min-cost flow), not measured: " +
        "imbalance of the samples before " + num(inf.imbalance_before) + ", after " + num(inf.imbalance_after) +
        ", adjustment " + num(inf.adjustment) +
        (D.run.sample_model ? "; sample model " + val(D.run.sample_model) : inf.sample_model ? "; sample model " + esc(inf.sample_model) : "") +
        (blocks.length && blocks[0].interval ? "; the interval columns give each count's range." : ".") + "</p>");
    }
    h.push("<h3>Heat of its blocks in address order</h3>", heatKey(vmax), cells(byAddr, vmax, metric));
    h.push('<h3>CFG</h3><div class="picture" id="fn-picture">' + (PICTURED[i] ? "drawing\u2026" : !F.blocks[i] ?
      "<p>No block map covers this function (was it compiled with -fbasic-block-address-map?).</p>" :
      '<p>CFG pictures are embedded for the ' + D.pictures + " hottest functions; draw this one with " +
      "<code>bbmap cfg PERF_DATA BINARY --function '" + esc(F.name[i]) + "' -o cfg.svg</code>.</p>") + "</div>");
    var li = layoutOfFn[i];
    if (li !== undefined) {
      var lay = D.layout.rows;
      var byId = {};
      blocks.forEach(function (b) { byId[b.id] = b; });
      var cl = det.layout.cluster.slice(det.layout.cluster_ptr[li], det.layout.cluster_ptr[li + 1]);
      var cold = det.layout.cold.slice(det.layout.cold_ptr[li], det.layout.cold_ptr[li + 1]);
      var orig = byAddr;
      var neu = cl.concat(cold).map(function (id) { return byId[id]; }).filter(Boolean);
      h.push('<section id="fn-layout"><h3>Layout</h3><dl class="facts">' +
        "<dt>Ext-TSP score (jumps inside)</dt><dd>" + fixed(lay.intra_before[li], 1) + " \u2192 " + fixed(lay.intra_after[li], 1) +
        " (" + change(lay.intra_before[li], lay.intra_after[li]) + ")</dd>" +
        "<dt>score of its calls</dt><dd>" + fixed(lay.inter_before[li], 1) + " \u2192 " + fixed(lay.inter_after[li], 1) + "</dd>" +
        "<dt>fall-throughs</dt><dd>" + num(lay.fallthrough_before[li]) + " \u2192 " + num(lay.fallthrough_after[li]) + "</dd>" +
        "<dt>hot / cold bytes</dt><dd>" + num(lay.hot_bytes[li]) + " / " + num(lay.cold_bytes[li]) + "</dd>" +
        "<dt>position in the function order</dt><dd>" + num(li + 1) + " of " + num(LN) + "</dd>" +
        "<dt>cluster (new order)</dt><dd>" + cl.join(" ") + "</dd><dt>cold part</dt><dd>" + (cold.join(" ") || "none") + "</dd></dl>" +
        "<p>Before (address order):</p>" + cells(orig, vmax, metric) +
        "<p>After (the hot cluster, then \u2016 the cold part, dashed):</p>" +
        cells(neu, vmax, metric, cl.length && cold.length ? cl.length : -1, cl.length) + "</section>");
    }
    if (D.verify) {
      var name = F.name[i];
      var wb = D.verify.worst_branches.filter(function (r) { return r.function === name; });
      var wk = D.verify.worst_blocks.filter(function (r) { return r.function === name; });
      if (wb.length || wk.length) {
        h.push("<h3>PGO map verdicts (mismatched)</h3>");
        if (wb.length) h.push(table("branches", [{ t: "block" }, { t: "successor: believed \u2192 measured [interval]" }, { t: "executions", num: true }],
          wb.map(function (r) {
            return "<tr><td>" + r.block + "</td><td>" + r.successors.map(function (s) {
              return s.id + ": " + num(s.believed) + " \u2192 " + num(s.measured) + " [" + num(s.interval[0]) + ", " + num(s.interval[1]) + "]";
            }).join("; ") + '</td><td class="num">' + num(r.executions) + "</td></tr>";
          })));
        if (wk.length) h.push(table("block frequencies (relative to the entry)", [{ t: "block" }, { t: "believed", num: true }, { t: "measured [interval]" }],
          wk.map(function (r) {
            return "<tr><td>" + r.block + '</td><td class="num">' + num(r.believed) + "</td><td>" + num(r.measured) +
              " [" + num(r.interval[0]) + ", " + num(r.interval[1]) + "]</td></tr>";
          })));
      }
    }
    var bk = det.blocks.keys.filter(function (k) { return EXTRA_BLOCK.indexOf(k) < 0; });
    h.push('<div class="twocol"><div>' + table("Blocks (map order)", [{ t: "block", num: true }, { t: "address", num: true }, { t: "size", num: true },
      { t: "samples", num: true }, { t: "period", num: true }, { t: "count" + (inferred ? " (inferred)" : ""), num: true }]
      .concat(bk.map(function (k) { return { t: esc(k) }; })).concat([{ t: "flags" }]),
      blocks.map(function (b) {
        return '<tr><td class="num">' + b.id + '</td><td class="num">' + hex(b.address) + '</td><td class="num">' + num(b.size) +
          '</td><td class="num">' + num(b.samples) + '</td><td class="num">' + num(b.period) + '</td><td class="num">' + num(b.count) + "</td>" +
          bk.map(function (k) { return "<td>" + val(b[k]) + "</td>"; }).join("") + "<td>" + esc(b.flags.join(" ")) + "</td></tr>";
      }), "fn-blocks") + "</div><div>");
    var ek = det.edges.keys.filter(function (k) { return ["from", "to", "count", "kind"].indexOf(k) < 0; });
    h.push(table("Edges, heaviest first", [{ t: "from" }, { t: "to" }, { t: "kind" }, { t: "count" + (inferred ? " (inferred)" : ""), num: true }]
      .concat(ek.map(function (k) { return { t: esc(k) }; })),
      edges.map(function (e) {
        return "<tr><td>" + esc(e.from) + "</td><td>" + esc(e.to) + "</td><td>" + esc(e.kind) + '</td><td class="num">' + num(e.count) + "</td>" +
          ek.map(function (k) { return "<td>" + val(e[k]) + "</td>"; }).join("") + "</tr>";
      }), "fn-edges"));
    h.push(table("Address ranges", [{ t: "address", num: true }, { t: "blocks", num: true }, { t: "samples", num: true }, { t: "period", num: true }],
      ranges.map(function (r) {
        return '<tr><td class="num">' + hex(r.address) + '</td><td class="num">' + num(r.blocks) + '</td><td class="num">' + num(r.samples) +
          '</td><td class="num">' + num(r.period) + "</td></tr>";
      }), "fn-ranges") + "</div></div>");
    view.innerHTML = h.join("");
    view.dataset.fn = i;
    if (PICTURED[i]) {
      return pictures().then(function (pics) {
        var host = document.getElementById("fn-picture");
        host.textContent = "";
        // a shadow root keeps the SVG's own <style> and ids away from the page's
        host.attachShadow({ mode: "open" }).innerHTML = pics[String(i)];
      });
    }
  }
  BB.open = function (i) { location.hash = "fn=" + i; };
  function route() {
    var m = /^#fn=(\d+)$/.exec(location.hash);
    if (m) open(+m[1]);
  }
  window.addEventListener("hashchange", route);

  // after the first paint: inflate the blocks, draw the strips, open a linked function
  BB.ready = new Promise(function (resolve) {
    requestAnimationFrame(function () {
      setTimeout(function () {
        detail().then(function (det) {
          stripsReady = det;
          BB.functions.render();
          route();
          resolve(det);
        });
      }, 0);
    });
  });
})();
