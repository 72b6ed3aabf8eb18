// The phone header: one line with a Menu button that opens the pages and the account
// menu below it (templates/base.html; the CSS hides the toggle on wider screens).
const bar = document.querySelector(".topbar");
const toggle = document.getElementById("menu-toggle");
if (bar && toggle) {
  const setOpen = (open) => {
    bar.classList.toggle("is-open", open);
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "Close" : "Menu";
  };
  toggle.addEventListener("click", () => setOpen(!bar.classList.contains("is-open")));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && bar.classList.contains("is-open")) {
      setOpen(false);
      toggle.focus();
    }
  });
}
