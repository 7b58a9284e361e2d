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
      const picked = new Set(Array.from(document.querySelectorAll("input[data-pick]:checked"), (box) => box.value));
      for (const region of document.querySelectorAll("[data-live][id]")) {
        const next = fresh.getElementById(region.id);
        if (next && next.outerHTML !== region.outerHTML) region.replaceWith(document.adoptNode(next));
      }
      for (const box of document.querySelectorAll("input[data-pick]")) box.checked = picked.has(box.value);
      countPicked();
      document.body.dataset.refreshedAt = String(Date.now());
      setStatus(paused ? "paused" : "live");
    } catch (error) {
      setStatus("offline");
    } finally {
      inFlight = false;
    }
  }

  // Multi-select on a job list: the boxes survive the live refresh (kept by job id above).
  function countPicked() {
    const count = document.querySelectorAll("input[data-pick]:checked").length;
    const label = document.querySelector("[data-testid=selected-count]");
    if (label) label.textContent = `${count} selected`;
    const all = document.querySelector("input[data-pick-all]");
    const boxes = document.querySelectorAll("input[data-pick]").length;
    if (all) all.checked = boxes > 0 && count === boxes;
  }

  document.addEventListener("change", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement)) return;
    if (box.hasAttribute("data-pick-all")) {
      for (const each of document.querySelectorAll("input[data-pick]")) each.checked = box.checked;
    }
    if (box.hasAttribute("data-pick") || box.hasAttribute("data-pick-all")) countPicked();
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-action")) return;
    event.preventDefault();
    const submitter = event.submitter instanceof HTMLButtonElement ? event.submitter : null;
    if (form.hasAttribute("data-bulk") && !document.querySelector("input[data-pick]:checked")) {
      say("No job selected: tick the jobs first.", false);
      return;
    }
    const question = (submitter && submitter.dataset.confirm) || form.dataset.confirm;
    if (question && !window.confirm(question)) return;
    const body = new FormData(form, submitter);
    if (question) body.set("confirmed", "yes");
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    try {
      // getAttribute: a field named "action" (the bulk form's buttons) hides form.action
      const response = await fetch(form.getAttribute("action") || location.href, {
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
      if (form.hasAttribute("data-bulk") && answer.ok) {
        for (const box of document.querySelectorAll("input[data-pick]")) box.checked = false;
      }
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
