/* The page's only script (issue 40), inline and offline: it loads nothing and sends
   nothing. Without it the page reads the same: every fold opens by hand, every row shows.
   - a link into a folded section opens the folds around its target;
   - the filter bar (shown only when this runs) hides the rows of other ops,
     implementations or verdicts: a row's op, implementation and verdict are its own or
     its nearest ancestor's data-op, data-impl and data-verdict (the op also the first
     part of its data-case, the verdict also its verdict badge); a row lacking one is
     never hidden for it; the matrix hides other implementations' columns;
   - a click on a column's header sorts its table by that column (data-v where the cell
     holds one, else the text); rows that do not fill the columns stay at the end. */
(function () {
  "use strict";
  var doc = document;
  var each = function (list, fn) { Array.prototype.forEach.call(list, fn); };

  function attrUp(el, name) {
    var n = el.closest("[" + name + "]");
    return n ? n.getAttribute(name) : "";
  }

  // -- folds: a link's target is shown, whatever folds around it
  function reveal(id) {
    var t = id ? doc.getElementById(id) : null;
    for (var p = t; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") p.open = true;
    }
  }
  function revealFragment(fragment) {
    try { reveal(decodeURIComponent(fragment.slice(1))); } catch (e) { /* a bad escape */ }
  }
  window.addEventListener("hashchange", function () { revealFragment(location.hash); });
  revealFragment(location.hash);
  doc.addEventListener("click", function (e) {
    var a = e.target.closest ? e.target.closest('a[href^="#"]') : null;
    if (a) revealFragment(a.getAttribute("href"));
  });

  // -- filter by op, implementation and verdict
  var form = doc.getElementById("filters");
  var ops = {};
  var rows = [];  // [element, op, impl, verdict, matrix cells]
  function verdictOf(el) {
    var v = el.getAttribute("data-verdict");
    if (v) return v;
    var badge = el.querySelector("span.v");
    if (badge) {
      for (var i = 0; i < badge.classList.length; i++) {
        var c = badge.classList[i];
        if (c.indexOf("v-") === 0) return c.slice(2);
      }
    }
    return attrUp(el, "data-verdict");
  }
  function opOf(el) {
    var op = attrUp(el, "data-op");
    if (op) return op;
    var first = attrUp(el, "data-case").split("/")[0];
    return ops[first] ? first : "";
  }
  function collect() {
    each(form.elements.op.options, function (o) { if (o.value) ops[o.value] = true; });
    each(doc.querySelectorAll("tbody > tr, details.group[data-op], details.group[data-impl]"),
      function (el) {
        var cells = el.tagName === "TR" ? el.querySelectorAll(":scope > td[data-impl]") : [];
        rows.push([el, opOf(el), cells.length ? "" : attrUp(el, "data-impl"),
                   cells.length ? "" : verdictOf(el), cells]);
      });
  }
  function apply() {
    if (!rows.length) collect();
    var f = {op: form.elements.op.value, impl: form.elements.impl.value,
             verdict: form.elements.verdict.value};
    var shown = 0, items = 0;
    rows.forEach(function (r) {
      var ok = !(f.op && r[1] && r[1] !== f.op) && !(f.impl && r[2] && r[2] !== f.impl) &&
               !(f.verdict && r[3] && r[3] !== f.verdict);
      if (ok && f.verdict && r[4].length) {  // a matrix row: one of its shown cells
        ok = Array.prototype.some.call(r[4], function (td) {
          return (!f.impl || td.getAttribute("data-impl") === f.impl) &&
                 td.getAttribute("data-verdict") === f.verdict;
        });
      }
      r[0].hidden = !ok;
      if (r[0].tagName === "TR" && (r[2] || r[4].length)) {
        items += 1;
        if (ok) shown += 1;
      }
    });
    each(doc.querySelectorAll("table.matrix [data-impl]"), function (c) {
      c.hidden = !!f.impl && c.getAttribute("data-impl") !== f.impl;
    });
    form.elements.shown.value = (f.op || f.impl || f.verdict)
      ? shown.toLocaleString() + " of " + items.toLocaleString() + " item rows shown" : "";
  }
  if (form) {
    form.hidden = false;
    form.addEventListener("change", apply);
    form.addEventListener("reset", function () { setTimeout(apply, 0); });
    form.addEventListener("submit", function (e) { e.preventDefault(); });
  }

  // -- sort a table by a column
  function columns(thead) {
    // the column of each header cell, through rowspans and colspans
    var taken = [], out = [];
    each(thead.rows, function (row, r) {
      var c = 0;
      each(row.cells, function (cell) {
        while (taken[r] && taken[r][c]) c += 1;
        for (var i = 0; i < cell.rowSpan; i++) {
          for (var j = 0; j < cell.colSpan; j++) (taken[r + i] = taken[r + i] || [])[c + j] = 1;
        }
        if (cell.colSpan === 1) out.push([cell, c]);
        c += cell.colSpan;
      });
    });
    return {cells: out, n: taken[0] ? taken[0].length : 0};
  }
  function key(cell) {
    var v = cell.getAttribute("data-v");
    if (v === null) {
      var inner = cell.querySelector("[data-v]");
      if (inner) v = inner.getAttribute("data-v");
    }
    if (v !== null && v !== "" && isFinite(+v)) return {num: +v};
    var t = cell.textContent.trim();
    return (v === "" || t === "" || t === "\u2014") ? null : {text: t};
  }
  function compare(a, b) {
    if (a === null || b === null) return (a === null) - (b === null);
    if ("num" in a && "num" in b) return a.num - b.num;
    return String(a.text || a.num).localeCompare(String(b.text || b.num), undefined,
                                                {numeric: true});
  }
  function sortBy(table, th, col, n) {
    var down = th.getAttribute("aria-sort") === "ascending";
    each(table.tHead.querySelectorAll("th[aria-sort]"), function (h) {
      h.setAttribute("aria-sort", "none");
    });
    th.setAttribute("aria-sort", down ? "descending" : "ascending");
    var body = table.tBodies[0], keyed = [], rest = [];
    each(body.rows, function (row, i) {
      var full = row.cells.length === n && !row.querySelector(":scope > [colspan]");
      if (full) keyed.push([key(row.cells[col]), i, row]); else rest.push(row);
    });
    keyed.sort(function (a, b) {
      var c = (a[0] === null || b[0] === null) ? compare(a[0], b[0])
        : compare(a[0], b[0]) * (down ? -1 : 1);
      return c || a[1] - b[1];
    });
    keyed.forEach(function (k) { body.appendChild(k[2]); });
    rest.forEach(function (row) { body.appendChild(row); });
  }
  each(doc.querySelectorAll("table"), function (table) {
    if (!table.tHead || table.tBodies.length !== 1 || table.tBodies[0].rows.length < 2 ||
        table.tBodies[0].querySelector("[rowspan]")) return;
    var cols = columns(table.tHead);
    cols.cells.forEach(function (hc) {
      var th = hc[0];
      if (!th.textContent.trim()) return;
      th.classList.add("sortable");
      th.setAttribute("aria-sort", "none");
      th.tabIndex = 0;
      var go = function () { sortBy(table, th, hc[1], cols.n); };
      th.addEventListener("click", go);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); go(); }
      });
    });
  });
}());
