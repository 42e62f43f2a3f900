// The console's page: it lists pending asks, reloads the list whenever the
// server says something changed (server-sent events, else every few
// seconds), and answers. Everything a caller wrote is set as text, never
// as markup.
"use strict";

const headers = { "X-Toolpdp-Console": "1" };
let revealed = {};   // decision id -> the ask as fetched again: its secrets shown, or whole
let shownIds = "";   // the asks on screen, to tell when the list changes under the pointer
let answering = {};  // decision id -> the deny message typed so far

async function api(path, init) {
  const resp = await fetch(path, Object.assign({ credentials: "same-origin", headers }, init || {}));
  if (resp.status === 401) { location.reload(); throw new Error("logged out"); }
  const body = await resp.json();
  if (!resp.ok) throw new Error(body.error || resp.statusText);
  return body;
}

function text(el, sel, value) { el.querySelector(sel).textContent = value; }

function age(ms) {
  const s = Math.round(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function render(item) {
  const a = revealed[item.ask.decision_id] || item.ask;
  const el = document.getElementById("ask-template").content.firstElementChild.cloneNode(true);
  el.id = "ask-" + a.decision_id;
  el.dataset.decisionId = a.decision_id;
  text(el, ".tool", a.tool_name);
  text(el, ".server", a.server ? "of server " + a.server : "");
  text(el, ".agent", a.agent_id);
  text(el, ".session", a.session_id || "(none)");
  text(el, ".call", a.call_id || "(none)");
  text(el, ".decision", a.decision_id);
  text(el, ".age", age(Number(a.age_millis)));
  text(el, ".message", a.message);
  const reasons = el.querySelector(".reasons");
  for (const r of a.reasons || []) {
    const li = document.createElement("li");
    li.textContent = r.axis + " " + r.rule + ": " + r.message;
    reasons.appendChild(li);
  }
  const change = a.definition_change;
  if (change) {
    // An ask about a tool's definition, not about a call: both side by side.
    el.querySelector(".definition-block").hidden = false;
    el.querySelector(".arguments-block").hidden = true;
    el.querySelector(".remember").hidden = true;
    text(el, ".kept-digest", change.kept_digest);
    text(el, ".new-digest", change.new_digest);
    text(el, ".kept-definition", change.kept_definition);
    text(el, ".new-definition", change.new_definition);
  }
  text(el, ".arguments", a.arguments);
  if (a.arguments_truncated) {
    const t = el.querySelector(".truncated");
    t.hidden = false;
    t.textContent = "Only the first " + a.arguments.length + " of " + a.arguments_bytes + " bytes of the arguments are shown: you have not seen the whole call. ";
    const more = document.createElement("button");
    more.type = "button";
    more.className = "whole";
    more.textContent = "Show the whole call";
    more.addEventListener("click", async () => {
      const one = await api("/api/ask?max_argument_bytes=1048576&id=" + encodeURIComponent(a.decision_id) + (a.revealed ? "&reveal=1" : ""));
      revealed[a.decision_id] = one.ask;
      refresh();
    });
    t.appendChild(more);
  }
  const env = Object.keys(a.env || {}).sort();
  if (env.length) {
    el.querySelector(".env-block").hidden = false;
    text(el, ".env", env.map((k) => k + "=" + a.env[k]).join("\n"));
  }
  if (a.execution_policy) {
    el.querySelector(".policy-block").hidden = false;
    text(el, ".policy", a.execution_policy);
  }
  if ((a.secrets || []).length) {
    const s = el.querySelector(".secrets");
    s.hidden = false;
    text(s, ".secrets-text", (a.revealed ? "Shown, secret: " : "Masked as secret: ") + a.secrets.join(", "));
    const b = s.querySelector(".reveal");
    if (a.revealed) b.hidden = true;
    b.addEventListener("click", async () => {
      const one = await api("/api/ask?reveal=1&max_argument_bytes=" + (a.arguments_truncated ? 16384 : 1048576) + "&id=" + encodeURIComponent(a.decision_id));
      revealed[a.decision_id] = one.ask;
      refresh();
    });
  }
  const msg = el.querySelector(".deny-message");
  msg.value = answering[a.decision_id] || "";
  msg.addEventListener("input", () => { answering[a.decision_id] = msg.value; });
  const answer = async (result, remember) => {
    for (const b of el.querySelectorAll(".answer button")) b.disabled = true;
    try {
      const body = { decision_id: a.decision_id, result, remember };
      if (result === "deny" && msg.value) body.deny_message = msg.value;
      const r = await api("/api/confirm", { method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, headers), body: JSON.stringify(body) });
      text(el, ".result", "answered: " + r.decision + (r.decision !== result ? " (the policy in force overruled the answer)" : ""));
      delete answering[a.decision_id];
      setTimeout(refresh, 800);
    } catch (e) {
      text(el, ".result", "not answered: " + e.message);
      for (const b of el.querySelectorAll(".answer button")) b.disabled = false;
    }
  };
  el.querySelector(".allow").addEventListener("click", () => answer("allow", false));
  el.querySelector(".remember").addEventListener("click", () => answer("allow", true));
  el.querySelector(".deny").addEventListener("click", () => answer("deny", false));
  const recent = el.querySelector(".recent");
  for (const d of item.recent || []) {
    const li = document.createElement("li");
    li.textContent = age(d.age_millis) + " ago: " + d.tool_name + " → " + d.decision + (d.answer ? " (answered " + d.answer + ")" : "") + (d.message ? ": " + d.message : "");
    recent.appendChild(li);
  }
  if (!recent.children.length) el.querySelector(".recent-block").hidden = true;
  return el;
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const body = await api("/api/pending");
    document.getElementById("approver").textContent = body.approver;
    const list = document.getElementById("asks");
    const keep = new Set(body.asks.map((x) => x.ask.decision_id));
    for (const id of Object.keys(revealed)) if (!keep.has(id)) delete revealed[id];
    const focused = document.activeElement && document.activeElement.classList.contains("deny-message") ? document.activeElement.closest(".ask").id : "";
    list.replaceChildren(...body.asks.map(render));
    // When the list changed, another ask may now be where the pointer was:
    // answers wait a moment, so a click meant for one never answers another.
    const ids = body.asks.map((x) => x.ask.decision_id).join(",");
    if (ids !== shownIds && shownIds !== "") {
      for (const b of list.querySelectorAll(".answer button")) b.disabled = true;
      setTimeout(() => { for (const b of list.querySelectorAll(".answer button")) b.disabled = false; }, 1000);
    }
    shownIds = ids;
    document.getElementById("empty").hidden = body.asks.length > 0;
    if (focused && document.getElementById(focused)) document.getElementById(focused).querySelector(".deny-message").focus();
  } catch (e) {
    document.getElementById("live").textContent = "error: " + e.message;
  } finally {
    refreshing = false;
  }
}

function live() {
  const es = new EventSource("/api/events");
  es.onopen = () => { document.getElementById("live").textContent = "live"; };
  es.onmessage = () => refresh();
  es.onerror = () => { document.getElementById("live").textContent = "reconnecting…"; };
}

refresh();
live();
setInterval(refresh, 5000);
