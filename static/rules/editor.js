// The rule editor: a structured condition builder that validates as you type (the
// server runs the same RuleSpec validation that saving runs), a dry-run of the change
// against recent requests (and whether saving applies at once or waits for a second
// risk-admin), and "test this rule" on a sample. Builds DOM with
// textContent only: rule values and request data are never parsed as HTML.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("editor-config").textContent);
  var form = document.getElementById("rule-form");
  var csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  var conditionsBox = document.getElementById("conditions");
  var validation = document.getElementById("validation");
  var timer = null;
  var sequence = 0;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function post(url, payload) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrf},
      body: JSON.stringify(payload)
    }).then(function (response) {
      return response.json().catch(function () {
        return {ok: false, message: "The server answered " + response.status + "."};
      });
    });
  }

  // --- Values: JSON when it parses (10, true, ["a"]), otherwise the text itself ---
  function parseValue(text) {
    var trimmed = text.trim();
    if (trimmed === "") return "";
    try { return JSON.parse(trimmed); } catch (e) { return text; }
  }
  function showValue(value) {
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  // --- Condition rows ---
  function addCondition(condition) {
    condition = condition || {path: "", op: "eq", value: ""};
    var index = conditionsBox.children.length;
    var row = el("div", {"class": "condition-row", "data-index": String(index)});
    var path = el("input", {type: "text", "class": "c-path", list: "path-suggestions", placeholder: "impact.recipient_count",
                            "aria-label": "Condition path"});
    path.value = condition.path;
    var op = el("select", {"class": "c-op", "aria-label": "Operator"});
    config.operators.forEach(function (name) {
      var option = el("option", {value: name}, name);
      if (name === condition.op) option.selected = true;
      op.appendChild(option);
    });
    var value = el("input", {type: "text", "class": "c-value", placeholder: "10", "aria-label": "Value"});
    value.value = showValue(condition.value);
    var remove = el("button", {type: "button", "class": "btn btn-ghost btn-small c-remove",
                               "aria-label": "Remove condition"}, "✕");
    remove.addEventListener("click", function () { row.remove(); renumber(); schedule(); });
    [path, op, value].forEach(function (node) { row.appendChild(node); });
    row.appendChild(remove);
    conditionsBox.appendChild(row);
  }
  function renumber() {
    Array.prototype.forEach.call(conditionsBox.children, function (row, i) { row.setAttribute("data-index", String(i)); });
  }

  function collect() {
    var rule = {};
    form.querySelectorAll("[data-key]").forEach(function (field) {
      var key = field.getAttribute("data-key");
      var type = field.getAttribute("data-type");
      if (type === "bool") rule[key] = field.checked;
      else if (type === "int") rule[key] = field.value.trim() === "" ? null : Number(field.value);
      else if (type === "list") rule[key] = field.value.split(",").map(function (s) { return s.trim(); }).filter(Boolean);
      else if (type === "optional") rule[key] = field.value === "" ? null : field.value;
      else rule[key] = field.value;
    });
    rule.conditions = Array.prototype.map.call(conditionsBox.children, function (row) {
      return {path: row.querySelector(".c-path").value.trim(), op: row.querySelector(".c-op").value,
              value: parseValue(row.querySelector(".c-value").value)};
    });
    return rule;
  }

  // --- Validation as you type ---
  function clearMarks() {
    form.querySelectorAll("[aria-invalid]").forEach(function (node) { node.removeAttribute("aria-invalid"); });
  }
  function mark(field) {
    var match = /^conditions\[(\d+)\](?:\.(path|op|value))?/.exec(field || "");
    var target = null;
    if (match) {
      var row = conditionsBox.children[Number(match[1])];
      if (row) target = row.querySelector(".c-" + (match[2] || "path"));
    } else {
      target = document.getElementById("f-" + String(field).split("[")[0]);
    }
    if (target) target.setAttribute("aria-invalid", "true");
  }
  function showValidation(result) {
    clearMarks();
    validation.textContent = "";
    if (result.ok) {
      validation.className = "validation valid";
      validation.textContent = "The rule is valid.";
      return;
    }
    validation.className = "validation invalid";
    validation.appendChild(el("strong", {}, "Not valid: "));
    if (result.field) validation.appendChild(el("span", {"class": "field"}, result.field + ": "));
    validation.appendChild(document.createTextNode(result.message || "unknown error"));
    mark(result.field);
  }
  function validateNow() {
    var mine = ++sequence;
    post(config.urls.validate, {rule: collect()}).then(function (result) {
      if (mine === sequence) showValidation(result);  // ignore answers to older keystrokes
    });
  }
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(validateNow, 250);
  }
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);

  // --- Dry-run ---
  var dryRunBox = document.getElementById("dry-run-result");
  document.getElementById("dry-run").addEventListener("click", function () {
    dryRunBox.textContent = "Replaying…";
    var limit = Number(document.getElementById("dry-run-limit").value) || 1000;
    post(config.urls.dry_run, {rule: collect(), replaces: config.existing, limit: limit}).then(function (report) {
      dryRunBox.textContent = "";
      if (!report.ok) {
        showValidation(report);
        dryRunBox.appendChild(el("p", {"class": "form-error"}, "Cannot dry-run: " + (report.field ? report.field + ": " : "") + report.message));
        return;
      }
      dryRunBox.appendChild(el("p", {"class": "dry-run-summary"}, report.summary));
      if (report.four_eyes && report.four_eyes.on) {
        dryRunBox.appendChild(el("p", {"class": "four-eyes", id: "four-eyes-verdict"}, report.four_eyes.waits_because
          ? "Saving waits for a second risk-admin: " + report.four_eyes.waits_because + "."
          : "Saving applies at once: it only makes the policy stricter."));
      }
      var list = el("ul", {"class": "transitions"});
      report.transitions.forEach(function (t) {
        list.appendChild(el("li", {"class": t.stricter ? "stricter" : "looser"}, t.sentence));
      });
      dryRunBox.appendChild(list);
      if (report.other_changes) {
        dryRunBox.appendChild(el("p", {"class": "muted"}, report.other_changes +
          " more would keep their level but change rule or number of approvals."));
      }
      if (report.changes.length) {
        var table = el("table", {"class": "rules-table changes"});
        var head = el("tr");
        ["When", "Action type", "Agent", "From", "To", "Rule now", "Rule then"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
        table.appendChild(el("thead")).appendChild(head);
        var body = table.appendChild(el("tbody"));
        report.changes.slice(0, 50).forEach(function (c) {
          var tr = el("tr");
          [c.created_at.slice(0, 16).replace("T", " "), c.action_type, c.agent, c.from_level, c.to_level,
           c.from_rule || "(default)", c.to_rule || "(default)"].forEach(function (v) { tr.appendChild(el("td", {}, v)); });
          body.appendChild(tr);
        });
        dryRunBox.appendChild(table);
        if (report.listed > 50 || report.level_changes + report.other_changes > report.listed) {
          dryRunBox.appendChild(el("p", {"class": "muted small"}, "Showing the first 50 changed requests."));
        }
      }
    });
  });

  // --- Test this rule ---
  var testBox = document.getElementById("test-result");
  function showTest(result) {
    testBox.textContent = "";
    if (!result.ok) {
      testBox.appendChild(el("p", {"class": "form-error"}, (result.field ? result.field + ": " : "") + result.message));
      return;
    }
    var c = result.classification;
    testBox.appendChild(el("p", {"class": "test-verdict"},
      (c.rule_name ? "Matched rule " + c.rule_name : "No rule matched (policy default)") + ": " + c.risk_level +
      (c.required_approvals ? ", " + c.required_approvals + " approval(s)" : "")));
    testBox.appendChild(el("p", {"class": "muted small"}, c.reason));
    if (result.conditions.length || config.rule) {
      testBox.appendChild(el("p", {}, "This rule " + (result.rule_matches ? "matches" : "does not match") +
        (result.action_type_matches ? "" : " (action type does not match)") + "."));
      var list = el("ul", {"class": "condition-results"});
      result.conditions.forEach(function (cond) {
        list.appendChild(el("li", {"class": cond.held ? "held" : "not-held"}, (cond.held ? "✓ " : "✗ ") + cond.text));
      });
      testBox.appendChild(list);
    }
  }
  document.getElementById("run-test").addEventListener("click", function () {
    var sample;
    try { sample = JSON.parse(document.getElementById("sample-json").value); }
    catch (e) { showTest({ok: false, field: "sample", message: "The sample is not valid JSON: " + e.message}); return; }
    post(config.urls.test, {rule: collect(), replaces: config.existing, sample: sample}).then(showTest);
  });
  var pick = document.getElementById("sample-pick");
  fetch(config.urls.samples, {credentials: "same-origin", headers: {"Accept": "application/json"}})
    .then(function (r) { return r.json(); })
    .then(function (data) {
      pick.textContent = "";
      pick.appendChild(el("option", {value: ""}, data.requests && data.requests.length ? "(choose)" : "(no requests yet)"));
      (data.requests || []).forEach(function (r) {
        pick.appendChild(el("option", {value: r.id}, r.created_at.slice(0, 16).replace("T", " ") + " " + r.action_type + " · " + r.agent + " · " + r.risk_level));
      });
    });
  pick.addEventListener("change", function () {
    if (!pick.value) return;
    post(config.urls.test, {rule: collect(), replaces: config.existing, request_id: pick.value}).then(function (result) {
      if (result.ok && result.sample) document.getElementById("sample-json").value = JSON.stringify(result.sample, null, 2);
      showTest(result);
    });
  });

  // --- Start ---
  (config.rule.conditions || []).forEach(addCondition);
  document.getElementById("add-condition").addEventListener("click", function () {
    addCondition();
    conditionsBox.lastElementChild.querySelector(".c-path").focus();
    schedule();
  });
  form.addEventListener("submit", function () {
    document.getElementById("rule-json").value = JSON.stringify(collect());
  });
})();
