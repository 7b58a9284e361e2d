// neverlost dashboard: refreshes the page's live parts in place and sends actions without a
// page load. Plain JS, no dependencies. Text from the server is inserted as parsed HTML that
// the server escaped; messages are set with textContent.
(() => {
  "use strict";
  const interval = Math.max(Number(document.body.dataset.refreshMs) || 2000, 250);
  const toggle = document.getElementById("live-toggle");
  const notice = document.getElementById("notice");
  let paused = false;
  let inFlight = false;
  let noticeTimer = 0;

  function setStatus(state) {
    if (!toggle) return;
    toggle.dataset.state = state;
    toggle.querySelector(".live-label").textContent =
      state === "paused" ? "Paused" : state === "offline" ? "Offline" : "Live";
  }

  function say(message, ok) {
    if (!notice) return;
    notice.textContent = message;
    notice.classList.toggle("notice-bad", !ok);
    notice.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => { notice.hidden = true; }, 6000);
  }

  async function refresh(force) {
    if (inFlight || (!force && (paused || document.hidden))) return;
    inFlight = true;
    try {
      const response = await fetch(location.href, { credentials: "same-origin", cache: "no-store" });
      if (response.status === 404) { say("This job no longer exists (deleted or pruned).", false); return; }
      if (!response.ok) { setStatus("offline"); return; }
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const region of document.querySelectorAll("[data-live][id]")) {
        const next = fresh.getElementById(region.id);
        if (next && next.outerHTML !== region.outerHTML) region.replaceWith(document.adoptNode(next));
      }
      document.body.dataset.refreshedAt = String(Date.now());
      setStatus(paused ? "paused" : "live");
    } catch (error) {
      setStatus("offline");
    } finally {
      inFlight = false;
    }
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-action")) return;
    event.preventDefault();
    const question = form.dataset.confirm;
    if (question && !window.confirm(question)) return;
    const body = new FormData(form);
    if (question) body.set("confirmed", "yes");
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    try {
      const response = await fetch(form.action, {
        method: "POST", body, credentials: "same-origin", headers: { "X-Dashboard-Fetch": "1" },
      });
      const contentType = response.headers.get("content-type") || "";
      if (!contentType.includes("json")) {
        say(`${response.status}: ${(await response.text()).slice(0, 300)}`, false);
        return;
      }
      const answer = await response.json();
      if (answer.location) { location.assign(answer.location); return; }
      say(answer.message, answer.ok);
      await refresh(true);
    } catch (error) {
      say(`The action did not reach the server: ${error}`, false);
    } finally {
      for (const button of form.querySelectorAll("button")) button.disabled = false;
    }
  });

  if (toggle) {
    toggle.addEventListener("click", () => {
      paused = !paused;
      toggle.setAttribute("aria-pressed", String(!paused));
      setStatus(paused ? "paused" : "live");
      if (!paused) refresh(true);
    });
  }
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(false); });
  setInterval(() => refresh(false), interval);
})();
