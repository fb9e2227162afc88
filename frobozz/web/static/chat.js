// The chat page: a client of the agent service's HTTP API. Every tab on a session follows its event relay
// (server-sent events), so all of them show the same conversation as it happens.
(() => {
  const root = document.getElementById("chat");
  const base = root.dataset.agent, session = root.dataset.session;
  const problem = document.getElementById("problem");
  const say = (text) => { problem.textContent = text; problem.hidden = !text; };
  const api = async (path, body) => {
    const signal = AbortSignal.timeout(30000);  // a request that hangs must not hold up the events behind it
    const response = await fetch(base + path, body === undefined ? {signal} : {
      signal, method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
    if (response.status === 404 && path === "/sessions") throw new Error("the agent service is not served here: run `frobozz serve all --http --workspaces ROOT`");
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.error || data.detail || `${response.status}`);
    return data;
  };
  const start = document.getElementById("start");
  if (start) {
    start.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        const made = await api("/sessions", {workspace: start.workspace.value});
        location.search = "?session=" + made.session_id;
      } catch (error) { say(error.message); }
    });
    return;
  }
  const log = document.getElementById("log"), status = document.getElementById("status");
  const send = document.getElementById("send");
  let bubble = null, shownMessages = 0;
  const add = (cls, text) => {
    const div = document.createElement("div");
    div.className = "msg " + cls;
    if (text !== undefined) div.textContent = text;
    log.appendChild(div);
    div.scrollIntoView({block: "end"});
    return div;
  };
  const agentBubble = () => {
    if (!bubble) { bubble = add("agent"); bubble.appendChild(document.createElement("span")).className = "text"; }
    return bubble;
  };
  const userMessages = async (upTo) => {  // what the user said (from any tab), in order, to the turn beginning
    const {messages} = await api(`/sessions/${session}/messages`);
    const said = messages.filter((m) => m.role === "user");
    const end = said.findIndex((m) => upTo && m.message_id === upTo) + 1 || said.length;  // (a replay: one by one)
    for (const m of said.slice(shownMessages, end)) {
      add("user", m.content);
      shownMessages += 1;
    }
  };
  const traceLink = async () => {  // the session's traces (the waterfall), once claude has named its session
    const link = document.getElementById("trace");
    const {claude_session_id: id} = await api(`/sessions/${session}`);
    if (!id) return;
    link.href = root.dataset.traces.replace(/_$/, encodeURIComponent(id));
    link.hidden = false;
  };
  traceLink().catch(() => {});
  const handlers = {
    status: (d) => {
      status.textContent = d.state;
      status.dataset.state = d.state;
      if (d.state === "streaming") {
        document.querySelectorAll(".question:not(.answered)").forEach((q) => q.classList.add("answered"));
        document.querySelectorAll(".question.answered button").forEach((b) => { b.disabled = true; });
      }
    },
    text_delta: (d) => {
      const text = agentBubble().querySelector("span.text:last-of-type") || agentBubble().appendChild(document.createElement("span"));
      text.textContent += d.text;
    },
    tool_use: (d) => {
      const details = agentBubble().appendChild(document.createElement("details"));
      details.className = "tool";
      details.id = "tool-" + d.id;
      details.innerHTML = "<summary></summary><pre class=input></pre><pre class=output></pre>";
      details.querySelector("summary").textContent = "tool " + d.name;
      details.querySelector(".input").textContent = JSON.stringify(d.input, null, 1);
      agentBubble().appendChild(document.createElement("span")).className = "text";
    },
    tool_result: (d) => {
      const details = document.getElementById("tool-" + d.tool_use_id);
      if (!details) return;
      details.querySelector(".output").textContent = typeof d.output === "string" ? d.output : JSON.stringify(d.output);
      if (d.is_error) details.classList.add("error");
    },
    question: (d) => {
      const box = agentBubble().appendChild(document.createElement("div"));
      box.className = "question";
      box.dataset.question = d.question_id;
      for (const q of d.questions) {
        box.appendChild(document.createElement("p")).textContent = q.question;
        for (const option of q.options || []) {
          const button = box.appendChild(document.createElement("button"));
          button.type = "button";
          button.textContent = option.label;
          button.title = option.description || "";
          button.addEventListener("click", async () => {
            box.querySelectorAll("button").forEach((b) => { b.disabled = true; });
            button.classList.add("chosen");
            try { await api(`/sessions/${session}/answers`, {question_id: d.question_id, answers: {[q.question]: option.label}}); }
            catch (error) { say(error.message); }
          });
        }
      }
      agentBubble().appendChild(document.createElement("span")).className = "text";  // what follows the answer
    },
    done: (d) => {
      traceLink().catch(() => {});
      if (d.is_error) say(d.result || "the turn failed");
      if (bubble) bubble.classList.add("done");
      bubble = null;
    },
    error: (d) => say(d.message),
  };
  const events = new EventSource(`${base}/sessions/${session}/events`);
  let handled = Promise.resolve();  // one event after the other: the user's message shows before the answer
  for (const [name, handle] of Object.entries(handlers)) {
    events.addEventListener(name, (e) => {
      handled = handled.then(async () => {
        const data = JSON.parse(e.data);
        if (name === "status" && data.state === "streaming") await userMessages(data.message_id).catch((error) => say(error.message));
        handle(data);
        root.dataset.lastEvent = e.lastEventId;
      }).catch((error) => say(error.message));
    });
  }
  events.onerror = () => { if (events.readyState === EventSource.CLOSED) say("the session's events stopped; reload to follow it again"); };
  // notifications: when the user allows it, this browser subscribes to the session's questions and finished turns
  const b64 = (text) => Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  document.getElementById("notify").addEventListener("click", async () => {
    try {
      if (!("serviceWorker" in navigator) || !("PushManager" in window)) throw new Error("this browser has no Web Push");
      if (await Notification.requestPermission() !== "granted") throw new Error("notifications are not allowed for this page");
      const worker = await navigator.serviceWorker.register(`${root.dataset.worker}?agent=${encodeURIComponent(base)}`);
      const {public_key} = await api("/push/key");
      const subscription = await worker.pushManager.subscribe({userVisibleOnly: true, applicationServerKey: b64(public_key)});
      await api("/push/subscriptions", {session_id: session, subscription: subscription.toJSON()});
      document.getElementById("notify").textContent = "Notifying";
    } catch (error) { say(`no notifications: ${error.message}`); }
  });
  // images attached (the button) or pasted into the text: uploaded when the message is sent, then named in it
  const attachInput = document.getElementById("attach-input"), attached = document.getElementById("attached");
  let pending = [];
  const showPending = () => {
    attached.textContent = pending.length ? `${pending.length} image${pending.length > 1 ? "s" : ""} attached` : "";
    attached.dataset.count = pending.length;
  };
  document.getElementById("attach").addEventListener("click", () => attachInput.click());
  attachInput.addEventListener("change", () => { pending.push(...attachInput.files); attachInput.value = ""; showPending(); });
  send.text.addEventListener("paste", (e) => {
    const images = [...(e.clipboardData ? e.clipboardData.files : [])].filter((f) => f.type.startsWith("image/"));
    if (images.length) { pending.push(...images); showPending(); }
  });
  const upload = async (file) => {
    const response = await fetch(`${base}/sessions/${session}/files`, {method: "POST", headers: {"content-type": file.type}, body: file});
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.error || `${response.status}`);
    return data.file_id;
  };
  send.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = send.text.value, images = pending;
    send.text.value = "";
    pending = [];
    showPending();
    try {
      const files = [];
      for (const image of images) files.push(await upload(image));
      await api(`/sessions/${session}/messages`, {text, files});
    } catch (error) { say(error.message); }
  });
})();
