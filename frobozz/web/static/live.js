// A run's page: the map opens on the current room; while the run plays, new turns, the chart, the map
// and the header arrive as server-sent events, with no reload.
(() => {
  const run = document.getElementById("run");
  if (!run) return;
  const centre = () => {
    const frame = document.querySelector(".map-frame");
    const here = frame?.querySelector(".room.current rect");
    if (!here) return;
    const box = here.getBBox();
    frame.scrollLeft = box.x + box.width / 2 - frame.clientWidth / 2;
    frame.scrollTop = box.y + box.height / 2 - frame.clientHeight / 2;
  };
  centre();
  if (!run.dataset.events) return;
  const turns = document.getElementById("turns");
  const source = new EventSource(run.dataset.events);
  source.addEventListener("turn", (e) => {
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    document.getElementById("no-turns")?.remove();
    turns.insertAdjacentHTML("beforeend", e.data);
    run.dataset.last = e.lastEventId;
    if (atBottom) turns.lastElementChild.scrollIntoView({ block: "end" });
  });
  source.addEventListener("figures", (e) => {
    document.getElementById("figures").innerHTML = e.data;
    centre();
  });
  source.addEventListener("status", (e) => { document.getElementById("status").innerHTML = e.data; });
  source.addEventListener("end", (e) => {
    document.getElementById("status").innerHTML = e.data;
    source.close();
    delete run.dataset.events;
  });
})();
