// fabtest view: table filters and the comparison chooser. No dependencies; pages work without it.
(function () {
  "use strict";
  function $(id) { return document.getElementById(id); }
  function count(rows) {
    var shown = rows.filter(function (r) { return !r.classList.contains("hidden"); }).length;
    var out = $("f-count");
    if (out) out.textContent = shown + " of " + rows.length + " shown";
  }

  // experiments table: name/id text, tag, branch
  var exps = Array.prototype.slice.call(document.querySelectorAll("tr.exp"));
  if (exps.length) {
    var apply = function () {
      var text = ($("f-name").value || "").toLowerCase(), tag = $("f-tag").value, branch = $("f-branch").value;
      exps.forEach(function (r) {
        var ok = (!text || r.dataset.name.indexOf(text) >= 0 || r.dataset.id.toLowerCase().indexOf(text) >= 0) &&
          (!tag || r.dataset.tags.split(" ").indexOf(tag) >= 0) && (!branch || r.dataset.branch === branch);
        r.classList.toggle("hidden", !ok);
      });
      count(exps);
    };
    ["f-name", "f-tag", "f-branch"].forEach(function (id) { $(id).addEventListener("input", apply); });
    apply();
  }

  // data packs (packs.py): a script sets window.fabtestData[key] to gzip JSON, 7 bits per character
  // (packs.ascii7); loaded once, by a <script> element (a static build opened from file:// cannot fetch)
  var packs = {};
  function unpack(text) {
    var bytes = new Uint8Array(Math.floor(text.length * 7 / 8)), acc = 0, bits = 0, n = 0;
    for (var i = 0; i < text.length; i++) {
      acc = ((acc << 7) | (text.charCodeAt(i) & 127)) & 0x7fff;  // NUL, \n, \r, ", \ came + 128
      bits += 7;
      if (bits >= 8) { bits -= 8; bytes[n++] = (acc >> bits) & 255; }
    }
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).json();
  }
  function loadPack(src, key) {
    if (!packs[key]) packs[key] = new Promise(function (resolve, reject) {
      var have = function () { return window.fabtestData && window.fabtestData[key]; };
      if (have()) { resolve(have()); return; }
      var s = document.createElement("script");
      s.src = src;
      s.onload = function () { if (have()) resolve(have()); else reject(new Error(src + " holds no " + key)); };
      s.onerror = function () { reject(new Error("cannot load " + src)); };
      document.head.appendChild(s);
    }).then(unpack);
    return packs[key];
  }

  // a static build's conversation page: conversation.html#<run> shows that run from the experiment's pack
  var packed = $("packed");
  if (packed) {
    var show = function () {
      var key = decodeURIComponent(window.location.hash.slice(1));
      loadPack(packed.dataset.src, packed.dataset.key).then(function (all) {
        var run = all[key];
        if (!run) { packed.textContent = "This experiment has no conversation " + key + "."; return; }
        document.title = run[0];
        $("packed-header").innerHTML = run[1];  // HTML rendered and escaped by fabtest, as when served
        packed.innerHTML = run[2];
        window.scrollTo(0, 0);
      }, function (err) { packed.textContent = "Cannot load the conversations: " + err.message; });
    };
    window.addEventListener("hashchange", show);
    show();
  }

  // runs of one experiment (or of both sides of a comparison): text in the transcripts, failed,
  // flaky, changed, failure type, criterion, tool; a scenario's group is hidden when none of its
  // runs is shown; a run link whose transcript matches every word is marked
  var scns = Array.prototype.slice.call(document.querySelectorAll("tr.scn"));
  if (scns.length) {
    var bar = $("scenario-filters"), sources = JSON.parse((bar && bar.dataset.sources) || "[]"), texts = null;
    var on = function (id) { return $(id) ? $(id).checked : false; };
    var val = function (id) { return $(id) ? $(id).value : ""; };
    // a row's runs, "<source index>:<run key>", read from its run links: the link's folder is its
    // experiment's, where its pack is
    var runsOf = function (r) {
      return Array.prototype.map.call(r.querySelectorAll("a.run"), function (a) {
        var href = a.getAttribute("href"), cut = href.lastIndexOf("/") + 1, dir = href.slice(0, cut);
        var name = href.indexOf("#") >= 0 ? href.slice(href.indexOf("#") + 1) : href.slice(cut).replace(/\.html$/, "");
        var source = sources.findIndex(function (s) { return s[0].slice(0, s[0].lastIndexOf("/") + 1) === dir; });
        return source + ":" + decodeURIComponent(name);
      });
    };
    var filter = function () {
      var words = val("f-text").toLowerCase().split(/\s+/).filter(Boolean);
      if (words.length && texts === null) {
        $("f-count").textContent = "loading the transcripts…";
        Promise.all(sources.map(function (s) { return loadPack(s[0], s[1]); })).then(
          function (all) { texts = all; filter(); },
          function (err) { $("f-count").textContent = "cannot search the transcripts: " + err.message; });
        return;
      }
      var failed = on("f-failed"), flaky = on("f-flaky"), changed = on("f-changed"), type = val("f-failure"),
        crit = val("f-criterion"), tool = val("f-tool");
      scns.forEach(function (r) {
        var hit = !words.length, links = r.querySelectorAll("a.run");
        runsOf(r).forEach(function (run, i) {
          var at = run.indexOf(":"), text = words.length ? (texts[+run.slice(0, at)] || {})[run.slice(at + 1)] || "" : "";
          if (typeof text !== "string") text = text[3];  // a static build's pack: [title, header, body, text]
          var match = words.length > 0 && words.every(function (w) { return text.indexOf(w) >= 0; });
          hit = hit || match;
          if (links[i]) links[i].classList.toggle("hit", match);
        });
        var ok = hit && (!failed || r.dataset.status === "failed") && (!flaky || r.dataset.flaky === "1") &&
          (!type || r.dataset.failure === type) && (!changed || r.dataset.changed === "1") &&
          (!crit || (r.dataset.criteria || "").split("\n").indexOf(crit) >= 0) &&
          (!tool || (r.dataset.tools || "").split("\n").indexOf(tool) >= 0);
        r.classList.toggle("hidden", !ok);
      });
      Array.prototype.forEach.call(document.querySelectorAll("tbody.group"), function (g) {
        g.classList.toggle("hidden", !g.querySelector("tr.scn:not(.hidden)"));
      });
      count(scns);
    };
    ["f-text", "f-failed", "f-flaky", "f-changed", "f-failure", "f-criterion", "f-tool"].forEach(function (id) {
      if ($(id)) $(id).addEventListener("input", filter);
    });
    filter();
  }

  // sortable tables: a column title's button sorts the groups (tbody.group, by data-s<col>) or
  // the rows (by the cell's data-v, else its text); numbers numerically; again: the other way
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll("button.sort"), function (btn) {
      btn.addEventListener("click", function () {
        var col = btn.dataset.col, th = btn.parentNode;
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        Array.prototype.forEach.call(table.querySelectorAll("th[aria-sort]"), function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var groups = table.querySelectorAll("tbody.group");
        var parent = groups.length ? table : table.tBodies[0];
        var items = Array.prototype.slice.call(groups.length ? groups : parent.rows);
        var key = function (el) {
          if (groups.length) return el.getAttribute("data-s" + col) || "";
          var cell = el.cells[col];
          return cell ? (cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim()) : "";
        };
        var num = function (v) {
          var t = String(v).trim();
          return /^[-+]?\$?[0-9][0-9.,]*%?$/.test(t) ? parseFloat(t.replace(/[%$,]/g, "")) : null;
        };
        items.sort(function (a, b) {
          var x = key(a), y = key(b), nx = num(x), ny = num(y);
          var c = (nx !== null && ny !== null) ? nx - ny : String(x).localeCompare(String(y));
          return c * dir;
        });
        items.forEach(function (el) { parent.appendChild(el); });
      });
    });
  });

  // review and label (served only: a static build cannot save): right / wrong on a judged check
  var labeling = $("labeling");
  if (labeling && window.location.protocol === "http:") {
    Array.prototype.forEach.call(document.querySelectorAll("form.label-form"), function (form) {
      form.hidden = false;
      form.addEventListener("submit", function (ev) {
        ev.preventDefault();
        var out = form.querySelector(".saved"), verdict = ev.submitter ? ev.submitter.value : "right";
        var body = {experiment: labeling.dataset.experiment, scenario: labeling.dataset.scenario,
          iteration: parseInt(labeling.dataset.iteration, 10), verdict: verdict, comment: form.elements.comment.value};
        if (form.dataset.kind === "conversation") body.kind = "conversation";  // the whole run's outcome
        else body.check = parseInt(form.dataset.check, 10);
        fetch(labeling.dataset.endpoint, {method: "POST", headers: {"Content-Type": "application/json"},
          body: JSON.stringify(body)})
          .then(function (r) { return r.json(); })
          .then(function (a) {
            if (a.error) { out.textContent = "not saved: " + a.error; return; }
            out.textContent = "saved (" + verdict + "): " + a.labels + " label(s), the judge agrees with " +
              Math.round(a.agreement * 100) + "%" + (a.kappa === null ? "" : ", kappa " + a.kappa.toFixed(2));
          })
          .catch(function (e) { out.textContent = "not saved: " + e; });
      });
    });
  }

  // the experiments list: two ticked rows open their comparison, the older one as baseline
  var pickBtn = $("compare-selected");
  if (pickBtn) {
    var picks = Array.prototype.slice.call(document.querySelectorAll("input.pick"));
    var chosen = function () {  // rows are newest first: the later in the page is the older
      return picks.filter(function (p) { return p.checked; }).map(function (p) { return p.value; }).reverse();
    };
    picks.forEach(function (p) {
      p.addEventListener("change", function () {
        var n = chosen().length;
        pickBtn.disabled = n !== 2;
        $("pick-note").textContent = n === 2 ? "" : "tick two experiments to compare them (" + n + " ticked)";
      });
    });
    pickBtn.addEventListener("click", function () {
      var two = chosen(), pair = two[0] + "--" + two[1], pairs = pickBtn.dataset.pairs;
      if (two.length !== 2) return;
      if (pairs !== undefined && pairs.split(" ").indexOf(pair) < 0) {
        $("pick-note").textContent = "This static build has each experiment compared with the one before it only; " +
          "run `fabtest view` to compare any two.";
        return;
      }
      window.location.href = "compare/" + encodeURIComponent(two[0]) + "--" + encodeURIComponent(two[1]) + ".html";
    });
  }

  // comparison chooser: opens compare/<baseline>--<current>.html
  var form = $("compare-form");
  if (form) {
    var base = $("c-baseline"), cur = $("c-current");
    if (base.options.length > 1) base.selectedIndex = 1;  // newest against the one before it
    // the text filter narrows both lists (hundreds of experiments): the first match is selected
    var find = $("c-filter");
    if (find) find.addEventListener("input", function () {
      var text = find.value.toLowerCase(), shown = 0;
      [base, cur].forEach(function (sel) {
        var first = null;
        Array.prototype.forEach.call(sel.options, function (o) {
          var ok = !text || o.textContent.toLowerCase().indexOf(text) >= 0;
          o.hidden = !ok;
          if (ok && first === null) first = o;
        });
        if (sel.selectedOptions.length && sel.selectedOptions[0].hidden && first) first.selected = true;
      });
      Array.prototype.forEach.call(base.options, function (o) { if (!o.hidden) shown++; });
      $("c-count").textContent = shown + " of " + base.options.length + " experiments match";
    });
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var pair = base.value + "--" + cur.value, pairs = form.dataset.pairs;
      if (base.value === cur.value) { $("c-note").textContent = "Choose two different experiments."; return; }
      if (pairs !== undefined && pairs.split(" ").indexOf(pair) < 0) {
        $("c-note").textContent = "This static build has each experiment compared with the one before it only; " +
          "run `fabtest view` to compare any two.";
        return;
      }
      window.location.href = "compare/" + encodeURIComponent(base.value) + "--" + encodeURIComponent(cur.value) + ".html";
    });
  }
})();
