// Navigation on a phone. The theme's scripts (pydata-sphinx-theme, sphinx-book-theme) bind the sidebar
// drawers to the first .primary-toggle / .secondary-toggle in the page, which is pydata's navbar button,
// hidden under sphinx-book-theme's header; the header's own buttons, the ones a reader sees below
// 992 px, then open nothing. Forward their clicks to the first button, which opens the drawer.
document.addEventListener("DOMContentLoaded", function () {
  [".primary-toggle", ".secondary-toggle"].forEach(function (selector) {
    var buttons = document.querySelectorAll(selector);
    Array.prototype.slice.call(buttons, 1).forEach(function (button) {
      button.addEventListener("click", function (event) {
        if (window.matchMedia("(min-width: 992px)").matches) return; // wide: the theme hides the sidebar itself
        event.preventDefault();
        event.stopPropagation();
        buttons[0].click();
      });
    });
  });
});
