// The registered error codes, as the server hands them to every page: base.html
// renders `{"STEP_UP_REQUIRED": "step_up_required", ...}` (controlplane/http/codes.py,
// `as_script_data`) into <script id="error-codes" type="application/json">.
//
// Scripts compare an answer's `code` with `CODES.STEP_UP_REQUIRED`, never with a string
// typed in JavaScript. A name the server did not register throws at the line that
// reads it, so a typo or a code renamed on the server fails loudly instead of
// silently never matching.

export class UnknownErrorCode extends Error {
  constructor(name) {
    super("No error code " + name + " is registered on the server (controlplane/http/codes.py).");
    this.name = "UnknownErrorCode";
  }
}

function load() {
  const source = document.getElementById("error-codes");
  if (!source) throw new Error("codes.js: the page has no #error-codes data (base.html renders it)");
  return Object.freeze(JSON.parse(source.textContent));
}

// Names the language itself asks any object for (JSON.stringify, await), never codes.
const PROTOCOL = new Set(["toJSON", "then"]);

export const CODES = new Proxy(load(), {
  get(table, name) {
    if (typeof name === "symbol" || PROTOCOL.has(name)) return Reflect.get(table, name);
    if (Object.hasOwn(table, name)) return table[name];
    throw new UnknownErrorCode(name);
  },
});
