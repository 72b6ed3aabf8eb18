// The rule editor: a structured condition builder that validates as you type (the
// server runs the same RuleSpec validation that saving runs), a dry-run of the change
// against recent requests (and whether saving applies at once or waits for a second
// risk-admin), and "test this rule" on a sample. Builds DOM with
// textContent only: rule values and request data are never parsed as HTML.

import { getJSON, postJSON } from "../js/http.js";

const config = JSON.parse(document.getElementById("editor-config").textContent);
const form = document.getElementById("rule-form");
const conditionsBox = document.getElementById("conditions");
const validation = document.getElementById("validation");
const dryRunBox = document.getElementById("dry-run-result");
const testBox = document.getElementById("test-result");
const sampleJson = document.getElementById("sample-json");
const pick = document.getElementById("sample-pick");
const pathWarnings = document.getElementById("path-warnings");
const pathList = document.getElementById("path-suggestions");
let timer = null;
let sequence = 0;

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([key, value]) => node.setAttribute(key, value));
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// --- Answers -------------------------------------------------------------------------
// http.js answers {ok, status, body}; a refusal's body is {code, message, details},
// and the field it names ("conditions[0].value") is details.field.
const fieldOf = (answer) => answer.body.details.field || "";
const fieldPrefix = (answer) => (fieldOf(answer) ? fieldOf(answer) + ": " : "");

/** A refusal decided here, before asking the server, in the same shape. */
function refusedHere(field, message) {
  return { ok: false, status: 0, body: { code: null, message, details: { field } } };
}

// --- Values: JSON when it parses (10, true, ["a"]), otherwise the text itself -------------
function parseValue(text) {
  const trimmed = text.trim();
  if (trimmed === "") return "";
  try { return JSON.parse(trimmed); } catch (error) { return text; }
}
function showValue(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

// --- Condition rows -------------------------------------------------------------------
function addCondition(condition = { path: "", op: "eq", value: "" }) {
  const index = conditionsBox.children.length;
  const row = el("div", { class: "condition-row", "data-index": String(index) });
  const path = el("input", { type: "text", class: "c-path", list: "path-suggestions", placeholder: "impact.recipient_count",
                             "aria-label": "Condition path" });
  path.value = condition.path;
  const op = el("select", { class: "c-op", "aria-label": "Operator" });
  config.operators.forEach(([name, label]) => {
    const option = el("option", { value: name }, label);
    if (name === condition.op) option.selected = true;
    op.appendChild(option);
  });
  const value = el("input", { type: "text", class: "c-value", placeholder: "10", "aria-label": "Value" });
  value.value = showValue(condition.value);
  const remove = el("button", { type: "button", class: "btn btn-ghost btn-small c-remove",
                                "aria-label": "Remove condition" }, "✕");
  remove.addEventListener("click", () => { row.remove(); renumber(); schedule(); });
  row.append(path, op, value, remove);
  conditionsBox.appendChild(row);
}
function renumber() {
  Array.from(conditionsBox.children).forEach((row, i) => row.setAttribute("data-index", String(i)));
}

function collect() {
  const rule = {};
  form.querySelectorAll("[data-key]").forEach((field) => {
    const key = field.dataset.key;
    const type = field.dataset.type;
    if (type === "bool") rule[key] = field.checked;
    else if (type === "int") rule[key] = field.value.trim() === "" ? null : Number(field.value);
    else if (type === "list") rule[key] = field.value.split(",").map((s) => s.trim()).filter(Boolean);
    else if (type === "optional") rule[key] = field.value === "" ? null : field.value;
    else rule[key] = field.value;
  });
  // An empty value box sends no value at all, so the server answers "'value' is
  // required" (write "" for the empty string): an empty box is never a valid rule.
  rule.conditions = Array.from(conditionsBox.children, (row) => {
    const text = row.querySelector(".c-value").value;
    const condition = { path: row.querySelector(".c-path").value.trim(), op: row.querySelector(".c-op").value };
    if (text.trim() !== "") condition.value = parseValue(text);
    return condition;
  });
  return rule;
}

// --- Validation as you type -------------------------------------------------------------
function clearMarks() {
  form.querySelectorAll("[aria-invalid]").forEach((node) => node.removeAttribute("aria-invalid"));
}
function mark(field) {
  const match = /^conditions\[(\d+)\](?:\.(path|op|value))?/.exec(field);
  let target = null;
  if (match) {
    const row = conditionsBox.children[Number(match[1])];
    if (row) target = row.querySelector(".c-" + (match[2] || "path"));
  } else if (field) {
    target = document.getElementById("f-" + field.split("[")[0]);
  }
  if (target) target.setAttribute("aria-invalid", "true");
}
function showValidation(answer) {
  clearMarks();
  validation.textContent = "";
  if (answer.ok) {
    validation.className = "validation valid";
    validation.textContent = "The rule is valid.";
    return;
  }
  validation.className = "validation invalid";
  validation.appendChild(el("strong", {}, "Not valid: "));
  if (fieldOf(answer)) validation.appendChild(el("span", { class: "field" }, fieldPrefix(answer)));
  validation.appendChild(document.createTextNode(answer.body.message));
  mark(fieldOf(answer));
}
async function validateNow() {
  const mine = ++sequence;
  const answer = await postJSON(config.urls.validate, { rule: collect() });
  if (mine === sequence) showValidation(answer);  // ignore answers to older keystrokes
}
function schedule() {
  clearTimeout(timer);
  timer = setTimeout(() => { validateNow(); checkPaths(); }, 250);
}

// --- Paths: suggestions for the action type, and warnings for paths nothing provides ------
// A warning never blocks saving: the server's answer says why the path may never resolve.
let pathSequence = 0;
function showPaths(body) {
  pathList.textContent = "";
  body.paths.forEach((path) => pathList.appendChild(el("option", { value: path })));
  conditionsBox.querySelectorAll(".c-path").forEach((input) => {
    input.classList.remove("path-unknown");
    input.removeAttribute("title");
  });
  pathWarnings.textContent = "";
  body.warnings.forEach((warning) => {
    const match = /^conditions\[(\d+)\]/.exec(warning.field);
    const row = match && conditionsBox.children[Number(match[1])];
    if (row) {
      const input = row.querySelector(".c-path");
      input.classList.add("path-unknown");
      input.title = warning.message;
    }
    pathWarnings.appendChild(el("li", { "data-field": warning.field }, warning.field + ": " + warning.message));
  });
  pathWarnings.hidden = body.warnings.length === 0;
}
let pathsAskedFor = null;
async function checkPaths() {
  // Only the action type and the paths matter: a keystroke in a value asks nothing.
  const rule = collect();
  const asking = JSON.stringify([rule.action_type, rule.conditions.map((c) => c.path)]);
  if (asking === pathsAskedFor) return;
  pathsAskedFor = asking;
  const mine = ++pathSequence;
  const answer = await postJSON(config.urls.paths, { rule });
  if (mine === pathSequence && answer.ok) showPaths(answer.body);
}
form.addEventListener("input", schedule);
form.addEventListener("change", schedule);

// --- Dry-run ---------------------------------------------------------------------------
// The sampled requests all get a stricter level, yet the change is not provably stricter.
const STRICTER_YET_WAITS = " although every sampled request gets a stricter level (a dry-run sees only past"
  + " requests; only a change that can loosen none applies at once)";
function showDryRun(report) {
  dryRunBox.appendChild(el("p", { class: "dry-run-summary" }, report.summary));
  if (report.four_eyes && report.four_eyes.on) {
    const allStricter = report.transitions.length > 0 && report.transitions.every((t) => t.stricter);
    dryRunBox.appendChild(el("p", { class: "four-eyes", id: "four-eyes-verdict" }, report.four_eyes.waits_because
      ? "Saving waits for a second risk-admin" + (allStricter ? STRICTER_YET_WAITS : "") + ": " + report.four_eyes.waits_because + "."
      : "Saving applies at once: it only makes the policy stricter."));
  }
  const list = el("ul", { class: "transitions" });
  report.transitions.forEach((t) => list.appendChild(el("li", { class: t.stricter ? "stricter" : "looser" }, t.sentence)));
  dryRunBox.appendChild(list);
  if (report.other_changes) {
    dryRunBox.appendChild(el("p", { class: "muted" }, report.other_changes +
      " more would keep their level but change rule or number of approvals."));
  }
  if (report.changes.length) {
    const table = el("table", { class: "rules-table changes" });
    const head = el("tr");
    ["When", "Action type", "Agent", "From", "To", "Rule now", "Rule then", ""].forEach((h) => head.appendChild(el("th", {}, h)));
    table.appendChild(el("thead")).appendChild(head);
    const body = table.appendChild(el("tbody"));
    report.changes.slice(0, 50).forEach((c) => {
      const tr = el("tr", { "data-request": c.request_id });
      // The first cell opens the request; "Test" classifies it here with this rule.
      const when = el("td");
      const stamp = c.created_at.slice(0, 16).replace("T", " ");
      // A link only where this risk-admin may open the request; else the row's details alone.
      when.appendChild(c.url ? el("a", { href: c.url, title: "Open the request" }, stamp)
        : el("span", { title: "Not a request you may open: its details are all here" }, stamp));
      tr.appendChild(when);
      [c.action_type, c.agent, c.from_level, c.to_level, c.from_rule || "(default)", c.to_rule || "(default)"]
        .forEach((v) => tr.appendChild(el("td", {}, v)));
      const test = el("button", { type: "button", class: "btn btn-ghost btn-small test-on-request" }, "Test");
      test.addEventListener("click", () => testOnRequest(c.request_id));
      tr.appendChild(el("td")).appendChild(test);
      body.appendChild(tr);
    });
    dryRunBox.appendChild(table);
    if (report.listed > 50 || report.level_changes + report.other_changes > report.listed) {
      dryRunBox.appendChild(el("p", { class: "muted small" }, "Showing the first 50 changed requests."));
    }
  }
}
document.getElementById("dry-run").addEventListener("click", async () => {
  dryRunBox.textContent = "Replaying…";
  const limit = Number(document.getElementById("dry-run-limit").value) || 1000;
  const answer = await postJSON(config.urls.dry_run, { rule: collect(), replaces: config.existing, limit });
  dryRunBox.textContent = "";
  if (!answer.ok) {
    showValidation(answer);
    dryRunBox.appendChild(el("p", { class: "form-error" }, "Cannot dry-run: " + fieldPrefix(answer) + answer.body.message));
    return;
  }
  showDryRun(answer.body);
});

// --- Test this rule ----------------------------------------------------------------------
function showTest(answer) {
  testBox.textContent = "";
  if (!answer.ok) {
    testBox.appendChild(el("p", { class: "form-error" }, fieldPrefix(answer) + answer.body.message));
    return;
  }
  const result = answer.body;
  const c = result.classification;
  testBox.appendChild(el("p", { class: "test-verdict" },
    (c.rule_name ? "Matched rule " + c.rule_name : "No rule matched (policy default)") + ": " + c.risk_level +
    (c.required_approvals ? ", " + c.required_approvals + " approval(s)" : "")));
  testBox.appendChild(el("p", { class: "muted small" }, c.reason));
  if (result.read_blind && result.read_blind.length) {
    // A stored request's masked params are read as masked: the answer does not depend on them.
    testBox.appendChild(el("p", { class: "muted small test-read-blind" },
      "Read as masked (the result does not depend on their values): " + result.read_blind.join(", ") + "."));
  }
  if (result.conditions.length || config.rule) {
    testBox.appendChild(el("p", {}, "This rule " + (result.rule_matches ? "matches" : "does not match") +
      (result.action_type_matches ? "" : " (action type does not match)") + "."));
    const list = el("ul", { class: "condition-results" });
    result.conditions.forEach((cond) => {
      list.appendChild(el("li", { class: cond.held ? "held" : "not-held" }, (cond.held ? "✓ " : "✗ ") + cond.text));
    });
    testBox.appendChild(list);
  }
}
document.getElementById("run-test").addEventListener("click", async () => {
  let sample;
  try {
    sample = JSON.parse(sampleJson.value);
  } catch (error) {
    showTest(refusedHere("sample", "The sample is not valid JSON: " + error.message));
    return;
  }
  showTest(await postJSON(config.urls.test, { rule: collect(), replaces: config.existing, sample }));
});

async function loadSamples() {
  const { body } = await getJSON(config.urls.samples);
  const requests = body.requests || [];
  pick.textContent = "";
  pick.appendChild(el("option", { value: "" }, requests.length ? "(choose)" : "(no requests yet)"));
  requests.forEach((r) => {
    pick.appendChild(el("option", { value: r.id },
      r.created_at.slice(0, 16).replace("T", " ") + " " + r.action_type + " · " + r.agent + " · " + r.risk_level));
  });
}
async function testOnRequest(requestId) {
  const answer = await postJSON(config.urls.test, { rule: collect(), replaces: config.existing, request_id: requestId });
  if (answer.ok && answer.body.sample) sampleJson.value = JSON.stringify(answer.body.sample, null, 2);
  showTest(answer);
}
pick.addEventListener("change", () => { if (pick.value) testOnRequest(pick.value); });

// --- Start ----------------------------------------------------------------------------------
(config.rule.conditions || []).forEach((condition) => addCondition(condition));
document.getElementById("add-condition").addEventListener("click", () => {
  addCondition();
  conditionsBox.lastElementChild.querySelector(".c-path").focus();
  schedule();
});
form.addEventListener("submit", () => {
  document.getElementById("rule-json").value = JSON.stringify(collect());
});
loadSamples();
checkPaths();
