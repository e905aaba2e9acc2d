// vlreg's feature browser: the index's search box keeps the rows whose text holds every
// word typed; a column's heading sorts the rows by it (again: the other way).
"use strict";
(function () {
  var box = document.getElementById("search");
  var body = document.querySelector("#features tbody");
  if (!box || !body) { return; }
  var rows = Array.prototype.slice.call(body.rows);
  function filter() {
    var words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var text = row.getAttribute("data-search");
      var keep = words.every(function (word) { return text.indexOf(word) >= 0; });
      row.hidden = !keep;
      shown += keep ? 1 : 0;
    });
    document.getElementById("shown").textContent = shown;
  }
  document.querySelectorAll("#features th[data-sort]").forEach(function (heading) {
    heading.style.cursor = "pointer";
    heading.addEventListener("click", function () {
      var key = "data-" + heading.getAttribute("data-sort");
      var sign = heading.getAttribute("data-order") === "down" ? 1 : -1;
      heading.setAttribute("data-order", sign < 0 ? "down" : "up");
      rows.sort(function (a, b) { return sign * (Number(a.getAttribute(key)) - Number(b.getAttribute(key))); });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
  box.addEventListener("input", filter);
  filter();
})();
