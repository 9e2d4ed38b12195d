// The book's explorers on the static page, without the 1.9 MB widget manager.
//
// Pages with widgets carry their state (<script type="application/vnd.jupyter.widget-state+json">) and
// one view tag per output (<script type="application/vnd.jupyter.widget-view+json">). An explorer made
// by roofline.widgets.frame_explorer uses a handful of ipywidgets models: boxes, HTML, images, selection
// sliders, stacks and jslinks. This script draws exactly those models as plain HTML (a range input per
// slider, the frames stacked in one grid cell, the marker stacks whose classes the explorer's own CSS
// reads to show one frame) as soon as the page is parsed. A view that uses any other model is left to
// the real widget manager (html-manager's embed.js, beside this file), which is then loaded; a page of
// explorers alone never loads it. In a live notebook nothing here runs: ipywidgets draws the same models.
(function () {
  "use strict";
  var here = document.currentScript && document.currentScript.src;
  var DRAWN = { BoxModel: 1, VBoxModel: 1, HBoxModel: 1, HTMLModel: 1, ImageModel: 1, SelectionSliderModel: 1,
                StackModel: 1, LayoutModel: 1, HTMLStyleModel: 1, SliderStyleModel: 1, LinkModel: 1 };
  var LAYOUT = { display: "display", grid_area: "gridArea", width: "width", max_width: "maxWidth",
                 height: "height", min_width: "minWidth" };

  function ref(value) { return typeof value === "string" && value.indexOf("IPY_MODEL_") === 0 ? value.slice(10) : null; }

  // every model a view reaches through its children, layouts and styles; null when one is not drawn here
  function reach(models, id, seen) {
    if (seen[id]) return seen;
    var m = models[id];
    if (!m || !DRAWN[m.model_name]) return null;
    seen[id] = true;
    var s = m.state;
    var next = [ref(s.layout), ref(s.style)].concat((s.children || []).map(ref));
    for (var i = 0; i < next.length; i++) if (next[i] && !reach(models, next[i], seen)) return null;
    return seen;
  }

  function draw(models, id, ctx) {
    var m = models[id], s = m.state, el;
    switch (m.model_name) {
      case "HTMLModel":
        el = document.createElement("div");
        el.className = "widget-html rl-html";
        el.innerHTML = s.value;
        break;
      case "ImageModel":
        el = document.createElement("img");
        el.className = "widget-image";
        el.alt = "";
        var data = (m.buffers || []).filter(function (b) { return b.path[0] === "value"; })[0];
        if (data) el.src = "data:image/" + s.format + ";base64," + data.data;
        break;
      case "SelectionSliderModel":
        el = document.createElement("label");
        el.className = "widget-slider rl-slider";
        var name = document.createElement("span"), input = document.createElement("input"), out = document.createElement("output");
        name.className = "rl-description";
        name.textContent = s.description;
        out.className = "widget-readout";
        // a screen reader says the new value when a step changes it (an <output> is a status region, but
        // not every reader treats it as live without saying so)
        out.setAttribute("aria-live", "polite");
        // every label, one a line: the readout's CSS lays them out unseen to reserve the widest one's room,
        // so that no step changes the readout's size
        out.dataset.labels = s._options_labels.join("\n");
        input.type = "range";
        input.min = 0;
        input.max = s._options_labels.length - 1;
        input.step = 1;
        input.value = s.index;
        var show = function () {
          out.textContent = s._options_labels[+input.value];
          input.setAttribute("aria-valuetext", s.description + " " + out.textContent);
        };
        show();
        input.addEventListener("input", function () { show(); ctx.set(id, "index", +input.value); });
        el.append(name, input, out);
        break;
      case "StackModel":
        el = document.createElement("div");
        var kids = s.children.map(function (c) { return draw(models, ref(c), ctx); });
        var pick = function (i) { el.replaceChildren(kids[i]); };
        pick(s.selected_index);
        ctx.watch(id, "selected_index", pick);
        break;
      default: // the boxes
        el = document.createElement("div");
        el.className = { VBoxModel: "widget-vbox", HBoxModel: "widget-hbox" }[m.model_name] || "widget-box";
        (s.children || []).forEach(function (c) { el.appendChild(draw(models, ref(c), ctx)); });
    }
    (s._dom_classes || []).forEach(function (c) { el.classList.add(c); });
    var layout = ref(s.layout) && models[ref(s.layout)].state;
    for (var key in LAYOUT) if (layout && layout[key]) el.style[LAYOUT[key]] = layout[key];
    return el;
  }

  function links(models) {
    var watchers = {};
    var ctx = {
      watch: function (id, attr, fn) { (watchers[id + "." + attr] = watchers[id + "." + attr] || []).push(fn); },
      set: function (id, attr, value) {
        (watchers[id + "." + attr] || []).forEach(function (fn) { fn(value); });
        for (var k in models) {
          var m = models[k];
          if (m.model_name === "LinkModel" && ref(m.state.source[0]) === id && m.state.source[1] === attr) {
            ctx.set(ref(m.state.target[0]), m.state.target[1], value);
          }
        }
      },
    };
    return ctx;
  }

  function loadManager() {
    var script = document.createElement("script");
    script.src = new URL("html-manager/embed.js", here).href;
    document.head.appendChild(script); // it draws the views left at the window's load (or at once, below)
    if (document.readyState === "complete") script.onload = function () { window.dispatchEvent(new Event("load")); };
  }

  function start() {
    var tag = document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
    if (!tag) return;
    var models = JSON.parse(tag.textContent).state, ctx = links(models), left = 0;
    document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').forEach(function (view) {
      var id = JSON.parse(view.textContent).model_id;
      if (!reach(models, id, {})) { left++; return; }
      var el = draw(models, id, ctx);
      el.classList.add("rl-static");
      view.parentNode.insertBefore(el, view);
      view.remove();
    });
    if (left) loadManager();
  }

  // ipywidgets 8 typesets labels with MathJax 2's MathJax.Hub.Queue; the book loads MathJax 3, where that
  // call throws. Map it onto MathJax 3, for views the widget manager draws.
  function mathjaxHub() {
    var mj = window.MathJax;
    if (!mj || mj.Hub) return;
    mj.Hub = { Queue: function () {
      Array.prototype.forEach.call(arguments, function (job) {
        if (Array.isArray(job) && job[0] === "Typeset" && job[2] && mj.startup) {
          mj.startup.promise.then(function () { return mj.typesetPromise([job[2]]); }).catch(console.error);
        }
      });
    } };
  }

  // Draw as soon as the page is parsed ("interactive"), before the deferred scripts (theme, MathJax)
  // run and DOMContentLoaded fires; the MathJax fix waits for MathJax, which is one of those.
  var drawn = false;
  function draw_once() { if (!drawn) { drawn = true; start(); } }
  if (document.readyState === "loading") {
    document.addEventListener("readystatechange", function () { if (document.readyState !== "loading") draw_once(); });
    document.addEventListener("DOMContentLoaded", function () { mathjaxHub(); draw_once(); });
  } else {
    mathjaxHub();
    draw_once();
  }
})();
