/* Case table, filters and matrix of the index page, from the JSON in #report-data.
   A case row is [[id prefix index, id rest], outcome code, duration ms, slug, flags, message, upstream index,
   [value index per axis, -1 when the case lacks the axis]]. */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var OUTCOMES = DATA.outcomes, AXES = DATA.axes, CASES = DATA.cases;
  var ID = 0, OUT = 1, MS = 2, SLUG = 3, FLAGS = 4, MSG = 5, UP = 6, VALS = 7;
  CASES.forEach(function (c) {  /* ids come as [prefix index, "[params]"], values without trailing -1s */
    c[ID] = DATA.prefixes[c[ID][0]] + c[ID][1];
    while (c[VALS].length < AXES.length) { c[VALS].push(-1); }
  });
  var HAS_PAGE = 1, HAS_REPRO = 2, STEP = 300, ANY = "", ABSENT = "-";
  var BAD = { failed: 1, error: 1, xpassed: 1 };
  var runAxis = AXES.map(function (a) { return a.name; }).indexOf("run");
  var state = { outcomes: {}, axis: AXES.map(function () { return ANY; }), words: [], limit: STEP };
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function seconds(ms) { return ms < 60000 ? (ms / 1000).toFixed(2) + " s" : Math.round(ms / 60000) + " min"; }

  function axisMatches(c, skipOutcome) {
    for (var a = 0; a < AXES.length; a++) {
      var want = state.axis[a];
      if (want === ANY) { continue; }
      var v = c[VALS][a];
      if (want === ABSENT ? v !== -1 : String(v) !== want) { return false; }
    }
    if (state.words.length) {
      var id = c[ID].toLowerCase();
      for (var i = 0; i < state.words.length; i++) { if (id.indexOf(state.words[i]) < 0) { return false; } }
    }
    return skipOutcome || state.outcomes[OUTCOMES[c[OUT]]] !== false;
  }

  function link(href, text) { return el("a", { href: href }, text); }

  function caseRow(c) {
    var tr = el("tr"), outcome = OUTCOMES[c[OUT]];
    var badge = el("td"); badge.appendChild(el("span", { "class": "o o-" + outcome }, outcome)); tr.appendChild(badge);
    var id = el("td", { "class": "id" });
    if (c[FLAGS] & HAS_PAGE) { id.appendChild(link("case/" + c[SLUG] + ".html", c[ID])); } else { id.textContent = c[ID]; }
    if (c[UP] >= 0) { id.title = "upstream: " + DATA.upstream[c[UP]]; }
    tr.appendChild(id);
    if (runAxis >= 0) { tr.appendChild(el("td", {}, c[VALS][runAxis] >= 0 ? AXES[runAxis].values[c[VALS][runAxis]] : "")); }
    tr.appendChild(el("td", {}, seconds(c[MS])));
    tr.appendChild(el("td", { "class": "muted" }, c[MSG]));
    var links = el("td", { "class": "links" });
    if (c[FLAGS] & HAS_PAGE) {
      var toggle = el("button", { type: "button", title: "show the case page here" }, "preview");
      toggle.addEventListener("click", function () { preview(tr, "case/" + c[SLUG] + ".html", toggle); });
      links.appendChild(toggle);
    }
    if (c[FLAGS] & HAS_REPRO) { links.appendChild(link("repro/" + c[SLUG] + ".sh", "reproducer")); }
    tr.appendChild(links);
    return tr;
  }

  function preview(tr, href, toggle) {
    var next = tr.nextSibling;
    if (next && next.className === "preview") { next.parentNode.removeChild(next); toggle.textContent = "preview"; return; }
    var row = el("tr", { "class": "preview" }), td = el("td", { colspan: String(tr.children.length) });
    td.appendChild(el("iframe", { src: href, loading: "lazy", title: "case page" }));
    row.appendChild(td);
    tr.parentNode.insertBefore(row, next);
    toggle.textContent = "hide";
  }

  function renderTable() {
    var body = document.querySelector("#cases tbody"), frag = document.createDocumentFragment();
    var shown = 0, matched = 0;
    for (var i = 0; i < CASES.length; i++) {
      if (!axisMatches(CASES[i], false)) { continue; }
      matched++;
      if (shown < state.limit) { frag.appendChild(caseRow(CASES[i])); shown++; }
    }
    body.textContent = "";
    body.appendChild(frag);
    $("shown").textContent = matched + " of " + CASES.length + " cases match" + (shown < matched ? ", first " + shown + " shown" : "");
    var more = $("more");
    more.hidden = shown >= matched;
    more.textContent = "show " + Math.min(STEP * 4, matched - shown) + " more";
  }

  function fillAxisSelect(select, allowNone) {
    select.textContent = "";
    if (allowNone) { select.appendChild(el("option", { value: "-1" }, "(none)")); }
    AXES.forEach(function (a, i) { select.appendChild(el("option", { value: String(i) }, a.name)); });
  }

  function selected(ids) {
    return ids.map(function (id) { return parseInt($(id).value, 10); }).filter(function (a) { return a >= 0; });
  }

  function hasParams(c) {
    for (var a = DATA.pseudo; a < AXES.length; a++) { if (c[VALS][a] >= 0) { return true; } }
    return false;
  }

  function keyOf(c, axes) { return axes.map(function (a) { return c[VALS][a]; }).join(","); }

  function labelOf(key, axes) {
    if (!axes.length) { return []; }
    return key.split(",").map(function (v, i) { return v === "-1" ? "(none)" : AXES[axes[i]].values[+v]; });
  }

  function sortKeys(keys) {
    return keys.sort(function (x, y) {
      var a = x.split(","), b = y.split(",");
      for (var i = 0; i < a.length; i++) {
        var p = +a[i] < 0 ? 1e9 : +a[i], q = +b[i] < 0 ? 1e9 : +b[i];
        if (p !== q) { return p - q; }
      }
      return 0;
    });
  }

  function renderMatrix() {
    var rows = selected(["row-0", "row-1"]), cols = selected(["col-0", "col-1"]);
    var cells = {}, rowKeys = {}, colKeys = {};
    var paramsOnly = $("params-only").checked;
    CASES.forEach(function (c) {
      if (!axisMatches(c, true) || (paramsOnly && !hasParams(c))) { return; }
      var r = keyOf(c, rows), k = keyOf(c, cols), id = r + "|" + k;
      rowKeys[r] = 1; colKeys[k] = 1;
      var cell = cells[id] || (cells[id] = { n: 0, bad: 0, worst: 99, counts: {} });
      var o = OUTCOMES[c[OUT]];
      cell.n++; cell.counts[o] = (cell.counts[o] || 0) + 1;
      if (BAD[o]) { cell.bad++; }
      if (c[OUT] < cell.worst) { cell.worst = c[OUT]; }
    });
    var table = $("matrix"), R = sortKeys(Object.keys(rowKeys)), C = sortKeys(Object.keys(colKeys));
    table.textContent = "";
    var colLabels = C.map(function (k) { return labelOf(k, cols); });
    for (var level = 0; level < Math.max(cols.length, 1); level++) {
      var head = el("tr");
      var corner = el("th", { "class": "corner", colspan: String(Math.max(rows.length, 1)) },
        level === cols.length - 1 || cols.length === 0 ? rows.map(function (a) { return AXES[a].name; }).join(" \u00d7 ") + " \\ " + cols.map(function (a) { return AXES[a].name; }).join(" \u00d7 ") : "");
      head.appendChild(corner);
      for (var j = 0; j < C.length; j++) {
        var text = cols.length ? colLabels[j][level] : "all";
        var span = 1;
        if (level < cols.length - 1) {  // group equal upper labels
          if (j > 0 && colLabels[j - 1][level] === text) { continue; }
          while (j + span < C.length && colLabels[j + span][level] === text) { span++; }
        }
        head.appendChild(el("th", { colspan: String(span) }, text));
      }
      table.appendChild(head);
    }
    R.forEach(function (r) {
      var tr = el("tr"), labels = rows.length ? labelOf(r, rows) : ["all"];
      labels.forEach(function (l) { tr.appendChild(el("th", {}, l)); });
      C.forEach(function (k) {
        var cell = cells[r + "|" + k];
        if (!cell) { tr.appendChild(el("td", { "class": "cell empty" })); return; }
        var worst = OUTCOMES[cell.worst], mixed = Object.keys(cell.counts).length > 1;
        var td = el("td", { "class": "cell c-" + worst + (mixed ? " mixed" : "") }, cell.bad ? cell.bad + "/" + cell.n : String(cell.n));
        td.title = (rows.length ? labelOf(r, rows).join(" ") : "") + " / " + (cols.length ? labelOf(k, cols).join(" ") : "") + ": " +
          Object.keys(cell.counts).map(function (o) { return cell.counts[o] + " " + o; }).join(", ");
        td.addEventListener("click", function () { focusCell(rows, r, cols, k); });
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
  }

  function focusCell(rows, r, cols, k) {
    var set = function (axes, key) {
      key.split(",").forEach(function (v, i) { if (axes.length) { state.axis[axes[i]] = v === "-1" ? ABSENT : v; } });
    };
    set(rows, r); set(cols, k);
    syncAxisFilters();
    update();
    $("cases-section").scrollIntoView();
  }

  function buildAxisFilters() {
    var box = $("axis-filters");
    AXES.forEach(function (a, i) {
      var select = el("select", { id: "axis-" + i, "data-axis": a.name });
      select.appendChild(el("option", { value: ANY }, a.name + ": any"));
      a.values.forEach(function (v, j) { select.appendChild(el("option", { value: String(j) }, a.name + " = " + v)); });
      select.appendChild(el("option", { value: ABSENT }, a.name + ": (none)"));
      select.addEventListener("change", function () {
        state.axis[i] = select.value;
        if (a.name === "test") { matrixAxesFor(i); }
        update();
      });
      box.appendChild(select);
    });
  }

  function setMatrixAxes(rows, cols) {
    ["row-0", "row-1"].forEach(function (id, n) { $(id).value = rows[n] === undefined ? "-1" : String(rows[n]); });
    ["col-0", "col-1"].forEach(function (id, n) { $(id).value = cols[n] === undefined ? "-1" : String(cols[n]); });
  }

  /* One test function selected: lay out its own axes, those with the most values in columns. */
  function matrixAxesFor(testAxis) {
    var want = state.axis[testAxis];
    if (want === ANY || want === ABSENT) { setMatrixAxes(DATA.defaults.rows, DATA.defaults.cols); return; }
    var seen = AXES.map(function () { return {}; });
    CASES.forEach(function (c) {
      if (String(c[VALS][testAxis]) !== want) { return; }
      c[VALS].forEach(function (v, a) { if (v >= 0) { seen[a][v] = 1; } });
    });
    var ranked = AXES.map(function (a, i) { return [Object.keys(seen[i]).length, i]; })
      .filter(function (p) { return p[0] > 1; })
      .sort(function (x, y) { return y[0] - x[0] || x[1] - y[1]; })
      .map(function (p) { return p[1]; });
    setMatrixAxes(ranked.length > 2 ? ranked.slice(2, 4) : [testAxis], ranked.slice(0, 2));
  }

  function syncAxisFilters() { AXES.forEach(function (a, i) { $("axis-" + i).value = state.axis[i]; }); }

  function readOutcomes() {
    document.querySelectorAll("#outcome-filters .f").forEach(function (b) { state.outcomes[b.value] = b.checked; });
  }

  function update() { state.limit = STEP; renderTable(); renderMatrix(); }

  ["row-0", "row-1", "col-0", "col-1"].forEach(function (id, n) {
    fillAxisSelect($(id), n % 2 === 1 || AXES.length === 0);
    var defaults = n < 2 ? DATA.defaults.rows : DATA.defaults.cols, pick = defaults[n % 2];
    $(id).value = pick === undefined ? "-1" : String(pick);
    $(id).addEventListener("change", renderMatrix);
  });
  $("params-only").addEventListener("change", renderMatrix);
  buildAxisFilters();
  document.querySelectorAll("#outcome-filters .f").forEach(function (b) {
    b.addEventListener("change", function () { readOutcomes(); update(); });
  });
  document.querySelectorAll("#summary [data-only]").forEach(function (button) {
    button.addEventListener("click", function () {
      document.querySelectorAll("#outcome-filters .f").forEach(function (b) { b.checked = b.value === button.dataset.only; });
      readOutcomes(); update();
      $("cases-section").scrollIntoView();
    });
  });
  $("q").addEventListener("input", function () {
    state.words = $("q").value.toLowerCase().split(/\s+/).filter(Boolean);
    update();
  });
  $("reset").addEventListener("click", function () {
    state.axis = AXES.map(function () { return ANY; }); state.words = []; $("q").value = "";
    document.querySelectorAll("#outcome-filters .f").forEach(function (b) { b.checked = true; });
    readOutcomes(); syncAxisFilters(); update();
  });
  $("more").addEventListener("click", function () { state.limit += STEP * 4; renderTable(); });
  readOutcomes();
  update();
  window.reportReady = performance.now();
  document.body.setAttribute("data-ready", "1");
})();
