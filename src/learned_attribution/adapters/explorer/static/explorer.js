// The explorer's one script: annotate the suggested texts (click or keyboard), save, refit with a progress bar.
(function () {
  "use strict";
  const stateNode = document.getElementById("state");
  if (!stateNode) return;
  const state = JSON.parse(stateNode.textContent);
  const message = (text, bad) => {
    const node = document.getElementById("message");
    if (node) { node.textContent = text; node.style.color = bad ? "#b00" : "#1a6"; }
  };
  const post = async (url, body) => {
    const response = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                                       body: JSON.stringify(body || {})});
    const data = await response.json().catch(() => ({error: "the server answered " + response.status}));
    if (!response.ok) throw new Error(data.error || ("HTTP " + response.status));
    return data;
  };
  const base = "/api/fold/" + encodeURIComponent(state.fold);

  const upload = document.getElementById("upload-form");
  if (upload) {
    upload.addEventListener("submit", async (event) => {
      event.preventDefault();
      const file = document.getElementById("texts-file").files[0];
      if (!file) { message("choose a file of texts first", true); return; }
      try {
        const data = await post(base + "/sessions", {filename: file.name, content: await file.text(),
                                                     k: parseInt(document.getElementById("k").value, 10)});
        window.location = data.url;
      } catch (error) { message(error.message, true); }
    });
    return;
  }
  if (!state.suggested) return;

  const saved = Object.fromEntries((state.saved || []).map((a) => [a.id, a]));
  const container = document.getElementById("items");
  const items = state.suggested.items.map((item, index) => {
    const node = document.createElement("div");
    node.className = "item";
    node.dataset.id = item.id;
    const head = document.createElement("div");
    head.innerHTML = "<b></b> predicted <i></i> · supports <select></select> <label><input type='checkbox'> skip</label>";
    head.querySelector("b").textContent = item.id;
    head.querySelector("i").textContent = item.label + " (" + item.probability.toFixed(3) + ")";
    const select = head.querySelector("select");
    state.classes.forEach((name) => { const o = document.createElement("option"); o.textContent = name; select.appendChild(o); });
    select.value = (saved[item.id] && saved[item.id].label) || item.label;
    select.className = "class";
    const skip = head.querySelector("input");
    skip.className = "skip";
    skip.addEventListener("change", () => node.classList.toggle("skipped", skip.checked));
    const words = document.createElement("p");
    const marked = new Set((saved[item.id] && saved[item.id].words) || []);
    item.words.forEach((word, w) => {
      if (w > 0 && item.offsets[w][0] > item.offsets[w - 1][1]) words.appendChild(document.createTextNode(" "));
      const span = document.createElement("span");
      span.className = "w" + (marked.has(w) ? " marked" : "");
      span.textContent = word;
      span.tabIndex = 0;
      span.dataset.index = w;
      span.setAttribute("role", "checkbox");
      span.setAttribute("aria-checked", marked.has(w));
      const toggle = () => {
        span.classList.toggle("marked");
        span.setAttribute("aria-checked", span.classList.contains("marked"));
      };
      span.addEventListener("click", toggle);
      span.addEventListener("keydown", (event) => {
        const spans = words.querySelectorAll(".w");
        if (event.key === " " || event.key === "Enter") { event.preventDefault(); toggle(); }
        else if (event.key === "ArrowRight" && w + 1 < spans.length) { spans[w + 1].focus(); }
        else if (event.key === "ArrowLeft" && w > 0) { spans[w - 1].focus(); }
      });
      words.appendChild(span);
    });
    node.appendChild(head);
    node.appendChild(words);
    container.appendChild(node);
    return {item, node, select, skip, words};
  });

  const annotations = () => items.filter((x) => !x.skip.checked).map((x) => ({
    id: x.item.id, text: x.item.text, label: x.select.value,
    words: Array.from(x.words.querySelectorAll(".w.marked")).map((s) => parseInt(s.dataset.index, 10)),
  }));
  document.getElementById("save").addEventListener("click", async () => {
    try {
      const data = await post(base + "/sessions/" + state.session + "/annotations", {annotations: annotations()});
      message("saved " + data.saved + " annotations to " + data.file);
    } catch (error) { message(error.message, true); }
  });

  const progress = document.getElementById("progress");
  const stage = document.getElementById("stage");
  const poll = async () => {
    const response = await fetch(base + "/sessions/" + state.session + "/refit");
    const job = await response.json();
    if (job.state === "running") {
      progress.hidden = false; progress.value = job.fraction; stage.textContent = job.stage + " (" + job.seconds + " s)";
      setTimeout(poll, 400);
    } else if (job.state === "done") {
      progress.value = 1; stage.textContent = "refit done in " + job.seconds + " s";
      window.location.reload();
    } else if (job.state === "failed") {
      progress.hidden = true; stage.textContent = "";
      message("refit failed: " + job.error + " (the previous explainer stays in use)", true);
    }
  };
  document.getElementById("refit").addEventListener("click", async () => {
    try {
      await post(base + "/sessions/" + state.session + "/refit");
      message("refitting…");
      poll();
    } catch (error) { message(error.message, true); }
  });
  if (state.job && state.job.state === "running") poll();
  if (state.job && state.job.state === "failed") message("last refit failed: " + state.job.error + " (the previous explainer stays in use)", true);
})();
