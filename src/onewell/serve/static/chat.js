// The chat page: sends the conversation to /v1/chat/completions with stream=true and reads the
// server-sent events off the response body (fetch + a small SSE parser), so no library is needed.
"use strict";

const $ = (id) => document.getElementById(id);
const log = $("log"), prompt = $("prompt"), sendButton = $("send"), stopButton = $("stop"), speed = $("speed");
const apiKeyInput = $("api-key");
let history = [];        // [{role, content}] sent with every request
let controller = null;   // aborts the running request

apiKeyInput.value = localStorage.getItem("onewell-api-key") || "";
apiKeyInput.addEventListener("change", () => localStorage.setItem("onewell-api-key", apiKeyInput.value));

function headers() {
  const h = { "Content-Type": "application/json" };
  if (apiKeyInput.value) h["Authorization"] = "Bearer " + apiKeyInput.value;
  return h;
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;  // textContent, never innerHTML: model output is not trusted markup
  log.appendChild(div);
  log.scrollTop = log.scrollHeight;
  return div;
}

async function errorMessage(response) {
  try {
    const body = await response.json();
    return `${response.status}: ${body.error?.message ?? JSON.stringify(body)}`;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

// Splits a byte stream into SSE events and calls onData with each event's data field.
async function readEvents(body, onData) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data && onData(data) === false) return;
    }
  }
}

async function send(text) {
  const system = $("system").value.trim();
  history.push({ role: "user", content: text });
  bubble("user", text);
  const reply = bubble("assistant streaming", "");
  const request = {
    messages: system ? [{ role: "system", content: system }, ...history] : history,
    stream: true,
    max_tokens: Number($("max-tokens").value) || 512,
    temperature: Number($("temperature").value),
  };
  controller = new AbortController();
  setBusy(true);
  let chunks = 0, firstAt = 0;
  speed.textContent = "…";
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(request), signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    await readEvents(response.body, (data) => {
      if (data === "[DONE]") return false;
      const event = JSON.parse(data);
      if (event.error) throw new Error(event.error.message);
      const piece = event.choices?.[0]?.delta?.content;
      if (piece) {
        if (!firstAt) firstAt = performance.now();
        chunks += 1;
        reply.textContent += piece;
        log.scrollTop = log.scrollHeight;
        const seconds = (performance.now() - firstAt) / 1000;
        if (seconds > 0) speed.textContent = `${((chunks - 1) / seconds).toFixed(1)} tok/s`;
      }
      if (event.timings) {  // the server's own measurement, on the last chunk
        const t = event.timings;
        speed.textContent = `${t.predicted_per_second.toFixed(1)} tok/s · prompt ${t.prompt_per_second.toFixed(1)} tok/s`;
      }
    });
  } catch (err) {
    if (err.name !== "AbortError") bubble("error", String(err.message || err));
  } finally {
    reply.classList.remove("streaming");
    history.push({ role: "assistant", content: reply.textContent });
    controller = null;
    setBusy(false);
  }
}

function setBusy(busy) {
  sendButton.disabled = busy;
  stopButton.disabled = !busy;
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = prompt.value.trim();
  if (!text || controller) return;
  prompt.value = "";
  send(text);
});
prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
stopButton.addEventListener("click", () => controller?.abort());
$("reset").addEventListener("click", () => {
  controller?.abort();
  history = [];
  log.replaceChildren();
  speed.textContent = "";
});

fetch("/v1/models", { headers: headers() })
  .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
  .then((list) => { $("model").textContent = list.data[0].id; })
  .catch((status) => { $("model").textContent = status === 401 ? "(API key needed: see Settings)" : "(offline)"; });
