// Loaded on pages with sliders, after RequireJS and before the widget manager (nb_ipywidgets_js in
// _config.yml). Two small fixes so the embedded widgets work from the book's own files:
(function () {
  var script = document.currentScript;
  // 1. The widget manager finds its fonts next to the module "@jupyter-widgets/html-manager/dist/...";
  //    without a path RequireJS puts that beside the page (chapters/@jupyter-widgets/..., a 404).
  var dist = script && script.dataset.htmlManager;
  if (dist && window.require && window.require.config) {
    window.require.config({ paths: { "@jupyter-widgets/html-manager/dist": new URL(dist, script.src).href } });
  }
  // 2. ipywidgets 8 typesets labels with MathJax 2's MathJax.Hub.Queue; the book loads MathJax 3, where
  //    that call throws. Map it onto MathJax 3 (MathJax's deferred script has run by DOMContentLoaded;
  //    the widgets render at "load").
  document.addEventListener("DOMContentLoaded", function () {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.startup) return;
    mj.Hub = {
      Queue: function () {
        Array.prototype.forEach.call(arguments, function (job) {
          if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
            mj.startup.promise.then(function () { return mj.typesetPromise([job[2]]); }).catch(console.error);
          }
        });
      },
    };
  });
})();
