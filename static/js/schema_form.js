// The answer form of a suspension card, generated from the step's resume schema
// (templates/approvals/_suspension_form.html). Strings, numbers, integers, booleans,
// enums, arrays of those and nested objects get fields (required marks, defaults,
// descriptions as help); anything else is a JSON editor. Both are checked live against
// the same schema by the small validator below, and a form that does not satisfy it is
// not sent. The server validates again and is the authority (approvals/resume_schema.py):
// this subset skips what it cannot check exactly, `pattern` included, since the
// browser's RegExp backtracks and an agent's pattern could freeze the reviewer's tab.
//
// Without this script the form still works: its textarea carries the JSON answer.

const PRIMITIVES = ["string", "number", "integer", "boolean"];

// --- Validation (a subset of JSON Schema 2020-12 / draft-07) -------------------------

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value; // string, boolean, object
}

function hasType(value, type) {
  const actual = typeOf(value);
  return actual === type || (type === "number" && actual === "integer");
}

// JSON with sorted keys: equal values compare equal whatever their key order.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function same(a, b) {
  return canonical(a) === canonical(b);
}

/** Every way `value` breaks `schema`, as [{path, message}]; paths are JSON pointers. */
export function validate(schema, value, path = "") {
  const errors = [];
  if (schema === true || schema === undefined) return errors;
  if (schema === false) return [{ path, message: "No value is allowed here." }];
  const fail = (message, at = path) => errors.push({ path: at, message });
  const types = schema.type === undefined ? null : [].concat(schema.type);
  if (types && !types.some((type) => hasType(value, type))) {
    fail(`Expected ${types.join(" or ")}.`);
    return errors;
  }
  if (schema.enum && !schema.enum.some((option) => same(option, value))) fail("Not one of the allowed values.");
  if ("const" in schema && !same(schema.const, value)) fail("Not the required value.");
  if (typeof value === "string") {
    const length = [...value].length;
    if (schema.minLength !== undefined && length < schema.minLength) fail(`At least ${schema.minLength} characters.`);
    if (schema.maxLength !== undefined && length > schema.maxLength) fail(`At most ${schema.maxLength} characters.`);
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) fail(`At least ${schema.minimum}.`);
    if (schema.maximum !== undefined && value > schema.maximum) fail(`At most ${schema.maximum}.`);
    if (typeof schema.exclusiveMinimum === "number" && value <= schema.exclusiveMinimum) fail(`More than ${schema.exclusiveMinimum}.`);
    if (typeof schema.exclusiveMaximum === "number" && value >= schema.exclusiveMaximum) fail(`Less than ${schema.exclusiveMaximum}.`);
    if (schema.multipleOf && !Number.isInteger(value / schema.multipleOf)) fail(`A multiple of ${schema.multipleOf}.`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) fail(`At least ${schema.minItems} items.`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) fail(`At most ${schema.maxItems} items.`);
    if (schema.uniqueItems && new Set(value.map(canonical)).size !== value.length) fail("Items must differ.");
    if (schema.items && typeof schema.items === "object" && !Array.isArray(schema.items)) {
      value.forEach((item, index) => errors.push(...validate(schema.items, item, `${path}/${index}`)));
    }
  }
  if (typeOf(value) === "object") {
    for (const name of schema.required || []) {
      if (!(name in value)) fail("Required.", `${path}/${name}`);
    }
    const properties = schema.properties || {};
    for (const [name, item] of Object.entries(value)) {
      if (name in properties) {
        errors.push(...validate(properties[name], item, `${path}/${name}`));
      } else if (schema.patternProperties) {
        continue; // matched by patterns the server checks (RE2)
      } else if (schema.additionalProperties === false) {
        fail(`Unexpected property "${name}".`, `${path}/${name}`);
      } else if (typeof schema.additionalProperties === "object") {
        errors.push(...validate(schema.additionalProperties, item, `${path}/${name}`));
      }
    }
  }
  return errors;
}

// --- Which schemas get fields ----------------------------------------------------------

function primitiveType(schema) {
  if (!schema || typeof schema !== "object") return null;
  if (schema.enum && schema.enum.length && schema.enum.every((v) => v === null || typeof v !== "object")) return "enum";
  return PRIMITIVES.includes(schema.type) ? schema.type : null;
}

function isArrayOfPrimitives(schema) {
  return schema.type === "array" && schema.items && !Array.isArray(schema.items) && primitiveType(schema.items) !== null;
}

// Keywords a generated object form would silently ignore: such an object is a JSON editor.
const OBJECT_EXTRAS = ["patternProperties", "allOf", "anyOf", "oneOf", "not", "if", "$ref", "dependentSchemas",
                       "dependentRequired", "dependencies", "unevaluatedProperties", "propertyNames"];

function isFormObject(schema) {
  return schema && schema.type === "object" && schema.properties && OBJECT_EXTRAS.every((k) => !(k in schema))
    && (schema.additionalProperties === undefined || schema.additionalProperties === false);
}

/** What a JSON editor reads as when its text does not parse. */
class InvalidJSON {
  constructor(message) { this.message = message; }
}

// --- Building the fields ---------------------------------------------------------------

let uid = 0;

function el(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text) node.textContent = text; // text only: the schema is the agent's, never markup
  return node;
}

function labelled(name, schema, required, control) {
  const id = `sf-${++uid}`;
  control.id = id;
  const wrap = el("div", { class: "sf-field" });
  const label = el("label", { for: id }, schema.title || name);
  if (required) label.append(el("span", { class: "sf-required", title: "required" }, " *"));
  wrap.append(label, control);
  if (schema.description) {
    const help = el("small", { class: "sf-help", id: `${id}-help` }, schema.description);
    control.setAttribute("aria-describedby", help.id);
    wrap.append(help);
  }
  return wrap;
}

/** A field for one primitive; returns {node, read} where read() is the value or undefined (unset). */
function primitiveField(name, schema, required, initial) {
  const kind = primitiveType(schema);
  const start = initial !== undefined ? initial : schema.default;
  let control;
  let read;
  if (kind === "enum") {
    control = el("select");
    if (!required || start === undefined) control.append(el("option", { value: "" }, "—"));
    schema.enum.forEach((option, index) => {
      const node = el("option", { value: String(index) }, typeof option === "string" ? option : JSON.stringify(option));
      if (same(option, start)) node.selected = true;
      control.append(node);
    });
    read = () => (control.value === "" ? undefined : schema.enum[Number(control.value)]);
  } else if (kind === "boolean") {
    control = el("input", { type: "checkbox" });
    control.checked = start === true;
    read = () => control.checked;
  } else if (kind === "number" || kind === "integer") {
    control = el("input", { type: "number", step: kind === "integer" ? "1" : "any", inputmode: "decimal" });
    if (typeof start === "number") control.value = String(start);
    read = () => {
      if (control.value.trim() === "") return undefined;
      const number = Number(control.value);
      return Number.isNaN(number) ? control.value : number; // a non-number fails validation, by name
    };
  } else {
    const long = (schema.maxLength || 0) > 200 || schema.format === "textarea";
    control = el(long ? "textarea" : "input", long ? { rows: "3" } : { type: "text" });
    if (typeof start === "string") control.value = start;
    read = () => (control.value === "" && !required ? undefined : control.value);
  }
  control.dataset.path = name;
  return { node: labelled(name, schema, required, control), read };
}

function arrayField(name, schema, required, initial) {
  const fieldset = el("fieldset", { class: "sf-array" });
  fieldset.append(el("legend", {}, schema.title || name));
  if (schema.description) fieldset.append(el("small", { class: "sf-help" }, schema.description));
  const list = el("div", { class: "sf-items" });
  const readers = [];
  const add = (value) => {
    const field = primitiveField(`${schema.items.title || name} ${readers.length + 1}`, schema.items, true, value);
    const remove = el("button", { type: "button", class: "btn btn-secondary sf-remove" }, "Remove");
    const entry = { read: field.read };
    remove.addEventListener("click", () => {
      readers.splice(readers.indexOf(entry), 1);
      field.node.remove();
      fieldset.dispatchEvent(new Event("input", { bubbles: true }));
    });
    field.node.append(remove);
    readers.push(entry);
    list.append(field.node);
  };
  const start = initial !== undefined ? initial : schema.default;
  (Array.isArray(start) ? start : []).forEach(add);
  const more = el("button", { type: "button", class: "btn btn-secondary sf-add" }, "Add");
  more.addEventListener("click", () => add(undefined));
  fieldset.append(list, more);
  const read = () => {
    const values = readers.map((entry) => entry.read());
    return values.length === 0 && !required ? undefined : values;
  };
  return { node: fieldset, read };
}

function jsonField(name, schema, required, initial) {
  const control = el("textarea", { rows: "4", class: "sf-json", spellcheck: "false" });
  const start = initial !== undefined ? initial : schema.default;
  if (start !== undefined) control.value = JSON.stringify(start, null, 2);
  const read = () => {
    if (control.value.trim() === "") return undefined;
    try { return JSON.parse(control.value); } catch (error) { return new InvalidJSON(error.message); }
  };
  return { node: labelled(`${name} (JSON)`, schema, required, control), read };
}

function objectField(name, schema, required, initial, root = false) {
  const container = el(root ? "div" : "fieldset", { class: "sf-object" });
  if (!root) {
    container.append(el("legend", {}, schema.title || name));
    if (schema.description) container.append(el("small", { class: "sf-help" }, schema.description));
  }
  const start = initial !== undefined ? initial : schema.default || {};
  const need = new Set(schema.required || []);
  const readers = [];
  for (const [key, sub] of Object.entries(schema.properties)) {
    const field = fieldFor(key, sub || {}, need.has(key), start[key]);
    container.append(field.node);
    readers.push([key, field.read]);
  }
  const read = () => {
    const value = {};
    for (const [key, readOne] of readers) {
      const one = readOne();
      if (one !== undefined) value[key] = one;
    }
    return Object.keys(value).length === 0 && !required && !root ? undefined : value;
  };
  return { node: container, read };
}

function fieldFor(name, schema, required, initial) {
  if (primitiveType(schema)) return primitiveField(name, schema, required, initial);
  if (isArrayOfPrimitives(schema)) return arrayField(name, schema, required, initial);
  if (isFormObject(schema)) return objectField(name, schema, required, initial);
  return jsonField(name, schema, required, initial);
}

// --- One card's form -----------------------------------------------------------------------

function parseInvalid(value, path = "") {
  // A JSON editor whose text does not parse: report it where it is.
  if (value instanceof InvalidJSON) return [{ path, message: `Not JSON: ${value.message}` }];
  if (value && typeof value === "object" && !Array.isArray(value)) {
    return Object.entries(value).flatMap(([key, item]) => parseInvalid(item, `${path}/${key}`));
  }
  return [];
}

function setUp(form) {
  if (form.dataset.schemaReady) return;
  const holder = form.querySelector("[data-resume-schema] script[type='application/json']");
  const carrier = form.querySelector("textarea[name=resume_data]");
  if (!holder || !carrier) return;
  form.dataset.schemaReady = "1";
  const schema = JSON.parse(holder.textContent);
  const proposed = form.dataset.answer ? JSON.parse(form.dataset.answer) : undefined;
  const errorsBox = form.querySelector("[data-schema-errors]");
  const fields = form.querySelector("[data-schema-fields]");

  let read;
  if (isFormObject(schema)) {
    const built = objectField("answer", schema, true, proposed, true);
    fields.append(built.node);
    carrier.closest("label").hidden = true; // the fields fill it in when the form is sent
    read = built.read;
  } else {
    form.classList.add("sf-json-only"); // the JSON editor, checked live against the schema
    read = () => {
      try { return JSON.parse(carrier.value); } catch (error) { return new InvalidJSON(error.message); }
    };
  }

  const check = () => {
    const value = read();
    const errors = parseInvalid(value);
    if (!errors.length) errors.push(...validate(schema, value));
    errorsBox.replaceChildren(...errors.slice(0, 10).map((e) => el("li", {}, `${e.path || "/"}: ${e.message}`)));
    errorsBox.hidden = errors.length === 0;
    carrier.setAttribute("aria-invalid", String(errors.length > 0));
    return { value, errors };
  };
  form.addEventListener("input", check);
  form.addEventListener("change", check);
  form.schemaCheck = check;
  if (carrier.closest("label").hidden === false) check();
}

// Capture phase: runs before the queue's decision handler, which posts the form.
document.addEventListener("submit", (event) => {
  const form = event.target.closest && event.target.closest("form[data-schema-form]");
  if (!form || !form.schemaCheck) return;
  const { value, errors } = form.schemaCheck();
  if (errors.length) {
    event.preventDefault();
    event.stopImmediatePropagation();
    form.querySelector("[data-schema-errors]").focus();
    return;
  }
  form.querySelector("textarea[name=resume_data]").value = JSON.stringify(value);
}, true);

function setUpAll(root) {
  root.querySelectorAll("form[data-schema-form]").forEach(setUp);
}

// Cards arrive later too (live updates replace them): set up every form that appears.
setUpAll(document);
new MutationObserver((changes) => {
  for (const change of changes) {
    change.addedNodes.forEach((node) => { if (node.nodeType === 1) setUpAll(node); });
  }
}).observe(document.body, { childList: true, subtree: true });
