// Rule list: reorder rows with the arrows (saved as ONE policy version with a note),
// and enable/disable a rule with a note. No inline script: CSP allows only our files.
(function () {
  "use strict";
  var table = document.getElementById("rules-table");
  if (!table) return;
  var body = table.tBodies[0];
  var orderInput = document.getElementById("order-input");
  var bar = document.getElementById("reorder-bar");

  function names() {
    return Array.prototype.map.call(body.querySelectorAll("tr[data-rule]"), function (row) {
      return row.getAttribute("data-rule");
    });
  }
  var original = names().join(",");

  body.addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) return;
    var row = button.closest("tr");
    if (button.classList.contains("move-up") && row.previousElementSibling) {
      body.insertBefore(row, row.previousElementSibling);
    } else if (button.classList.contains("move-down") && row.nextElementSibling) {
      body.insertBefore(row.nextElementSibling, row);
    } else if (button.classList.contains("toggle-rule")) {
      var form = document.getElementById("toggle-form");
      form.action = button.getAttribute("data-url");
      document.getElementById("toggle-enabled").value = button.getAttribute("data-enabled");
      document.getElementById("toggle-submit").textContent =
        (button.getAttribute("data-enabled") === "1" ? "Enable " : "Disable ") + row.getAttribute("data-rule");
      form.hidden = false;
      document.getElementById("toggle-note").focus();
      return;
    } else {
      return;
    }
    button.focus();
    orderInput.value = names().join(",");
    bar.hidden = orderInput.value === original;
  });
})();
