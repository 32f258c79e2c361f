// drover dashboard: live updates over server-sent events. An element with
// data-live="<url>" gets its content replaced by each "overview" event.
// Loaded as a file (the Content-Security-Policy allows no inline script).
(function () {
  "use strict";
  function connect(el) {
    var es = new EventSource(el.getAttribute("data-live"));
    es.addEventListener("overview", function (ev) {
      el.innerHTML = ev.data;
      el.setAttribute("data-updated", String(Date.now()));
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(connect);
    // "Select all" boxes of bulk forms.
    document.querySelectorAll("input[data-select-all]").forEach(function (box) {
      box.addEventListener("change", function () {
        var form = box.closest("form");
        form.querySelectorAll("input[name=item]").forEach(function (b) {
          b.checked = box.checked;
        });
      });
    });
  });
})();
// Copy buttons of the lists: copy the whole id (without a script the id is
// in the link and its title).
(function () {
  "use strict";
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("button[data-copy]");
    if (!b || !navigator.clipboard) return;
    navigator.clipboard.writeText(b.getAttribute("data-copy")).then(function () {
      b.textContent = "copied";
    });
  });
})();
