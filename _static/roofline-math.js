// Display equations that fit the column. MathJax 3 (the book vendors 3.2.2) does not break long
// display equations into lines; its CHTML output sizes everything in em, so scaling the container's
// font size scales the whole equation, with the layout following. Once MathJax has typeset the page,
// every display equation wider than its box is scaled down to that width, and again whenever the
// window's width changes (each from its own size as MathJax set it, so shrinking never compounds).
(function () {
  "use strict";
  var SELECTOR = 'mjx-container[display="true"]';

  function fit(el) {
    if (el.dataset.rlSize === undefined) el.dataset.rlSize = el.style.fontSize || "";
    el.style.fontSize = el.dataset.rlSize; // MathJax's own size first, then measure
    var box = el.clientWidth, math = el.firstElementChild, wide = Math.max(el.scrollWidth, math ? math.scrollWidth : 0);
    if (!box || wide <= box) return;
    var base = parseFloat(el.dataset.rlSize) || 100; // a percentage, as MathJax writes it
    el.style.fontSize = (base * box / wide * 0.98).toFixed(2) + "%";
  }

  function fitAll() { document.querySelectorAll(SELECTOR).forEach(fit); }

  // MathJax's startup.js is deferred: wait for it (a page without math has no MathJax script)
  function whenTypeset(tries) {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(fitAll);
    } else if (tries < 600 && (document.readyState !== "complete" || document.querySelector('script[src*="mathjax"]'))) {
      setTimeout(function () { whenTypeset(tries + 1); }, 50);
    }
  }

  var width = window.innerWidth, pending = null;
  window.addEventListener("resize", function () {
    if (window.innerWidth === width) return;
    width = window.innerWidth;
    if (pending) cancelAnimationFrame(pending);
    pending = requestAnimationFrame(fitAll);
  });
  whenTypeset(0);
})();
