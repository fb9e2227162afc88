// The chat page's service worker: shows the agent service's Web Push notifications (a waiting question, a
// finished turn) and answers a question from its action buttons. The agent's base URL comes in its own URL.
const agent = new URL(self.location).searchParams.get("agent") || "/agent";

self.addEventListener("push", (event) => {
  const note = event.data ? event.data.json() : {title: "Frobozz", body: ""};
  event.waitUntil(self.registration.showNotification(note.title, {
    body: note.body, tag: `${note.session_id}:${note.type}`, data: note,
    actions: (note.actions || []).map((a) => ({action: a.action, title: a.title})),
  }));
});

self.addEventListener("notificationclick", (event) => {
  const note = event.notification.data || {};
  event.notification.close();
  if (event.action && note.type === "question") {  // an answer button: the answer goes to the service
    event.waitUntil(fetch(`${agent}/sessions/${note.session_id}/answers`, {
      method: "POST", credentials: "same-origin", headers: {"content-type": "application/json"},
      body: JSON.stringify({question_id: note.question_id, answers: {[note.question]: event.action}}),
    }));
    return;
  }
  event.waitUntil(self.clients.openWindow(`/chat?session=${note.session_id}`));
});
