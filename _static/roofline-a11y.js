// What a screen reader or a keyboard needs from the book's pages that the HTML does not give by itself.
//
// - A table that scrolls inside its own box (appendix A's long table, any wide table on a phone) can be
//   scrolled from the keyboard: it becomes a focusable region named after its caption (WCAG 2.1.1; axe:
//   scrollable-region-focusable). Checked again when the window changes size. One that scrolls sideways is
//   marked (data-rl-sideways) and shows a line above it saying that more columns lie to the right.
// - An empty header cell (the corner above a column of row names, as the package's tables draw it)
//   becomes a data cell: a header that names nothing is announced as an empty header (axe: empty-table-header).
(function () {
  "use strict";
  var SCROLLERS = ".bd-article .roofline-table-wrap, .bd-article table:not(.mjx-table)";

  function focusable(el) {
    var sideways = el.scrollWidth > el.clientWidth + 1;
    var scrolls = sideways || el.scrollHeight > el.clientHeight + 1;
    var style = getComputedStyle(el);
    var clipped = /(auto|scroll)/.test(style.overflowX + " " + style.overflowY);
    // a table cut at the column's edge says so above it (roofline.css), so that no reader misses its last columns
    if (sideways && /(auto|scroll)/.test(style.overflowX)) el.dataset.rlSideways = "1";
    else delete el.dataset.rlSideways;
    if (scrolls && clipped) {
      if (!el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("role", "region");
        var caption = el.querySelector("caption");
        el.setAttribute("aria-label", caption ? caption.textContent.trim() : "table");
        el.dataset.rlScroller = "1";
      }
    } else if (el.dataset.rlScroller) {
      el.removeAttribute("tabindex");
      el.removeAttribute("role");
      el.removeAttribute("aria-label");
      delete el.dataset.rlScroller;
    }
  }

  function emptyHeaders() {
    document.querySelectorAll(".bd-article thead th").forEach(function (th) {
      if (th.textContent.trim() || th.querySelector("img, svg, mjx-container")) return;
      var td = document.createElement("td");
      for (var i = 0; i < th.attributes.length; i++) td.setAttribute(th.attributes[i].name, th.attributes[i].value);
      th.replaceWith(td);
    });
  }

  function scrollers() { document.querySelectorAll(SCROLLERS).forEach(focusable); }

  function start() {
    emptyHeaders();
    scrollers();
    var pending = null;
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(scrollers, 150);
    });
    // MathJax and the fonts change the tables' widths after the page is parsed
    window.addEventListener("load", scrollers);
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(scrollers);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
