// The emergency-stop banner (templates/_emergency_banner.html) kept current from the
// live socket's `emergency.changed` events. The wording is the server's: this module
// only chooses which of the banner's two sentences shows and fills in the names.

const banner = document.getElementById("emergency-banner");  // absent on the sign-in page
const stoppedAgents = new Set(banner && banner.dataset.agents ? banner.dataset.agents.split(",") : []);
let globalStop = Boolean(banner && banner.dataset.global);

function render() {
  const everyone = banner.querySelector(".emergency-detail[data-scope=global]");
  const some = banner.querySelector(".emergency-detail[data-scope=agents]");
  everyone.hidden = !globalStop;
  some.hidden = globalStop || stoppedAgents.size === 0;
  banner.querySelector(".emergency-agents").textContent = Array.from(stoppedAgents).join(", ");
  banner.hidden = !globalStop && stoppedAgents.size === 0;
}

/** Apply an `emergency.changed` message: `{scope: "global" | "agent", agent, on}`. */
export function updateEmergency(message) {
  if (!banner) return;
  if (message.scope === "agent" && message.agent) {
    if (message.on) stoppedAgents.add(message.agent); else stoppedAgents.delete(message.agent);
  } else {
    globalStop = Boolean(message.on);
  }
  render();
}
