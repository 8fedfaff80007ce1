// Live page: poll the JSON log API for lines after the ones shown, every second, until the
// deployment has finished (then once more, for lines written after the last state); on each
// state change, refresh the page's other live parts (below).
// The URL is relative to the page, so it works behind any host name or path prefix.
(function () {
  var log = document.getElementById("log");
  var status = document.getElementById("log-status");
  var next = parseInt(log.dataset.next, 10) || 0;
  var finished = log.dataset.finished === "true";
  function text(line) {
    var time = (line.time || "").replace(/^.*T/, "").replace(/(Z|\+00:00)$/, "");
    var parts = [time, line.message || ""];
    Object.keys(line).forEach(function (key) {
      if (key === "time" || key === "message") return;
      var value = line[key];
      parts.push(key + "=" + (typeof value === "string" ? value : JSON.stringify(value)));
    });
    return parts.join(" ").trim();
  }
  function poll(last) {
    fetch(log.dataset.url + "?after=" + next, { headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (page) {
        var atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        page.lines.forEach(function (line) {
          var div = document.createElement("div");
          div.className = "line" + (line.error ? " error" : "");
          div.textContent = text(line);
          log.appendChild(div);
        });
        next = page.next;
        var state = document.getElementById("state");
        if (page.state && state.textContent !== page.state) {
          state.textContent = page.state;
          state.className = "state " + page.state;
          refresh();
        }
        if (atEnd) log.scrollTop = log.scrollHeight;
        if (page.finished && last) { status.textContent = "Finished."; return; }
        setTimeout(function () { poll(page.finished); }, page.finished ? 2000 : 1000);
      })
      .catch(function () { setTimeout(function () { poll(false); }, 2000); });
  }
  // Every other field (approver, outcome, check runs, buttons, timeline) follows a state
  // change: the page itself without log and diff (?live=1) is fetched and those parts swapped.
  var LIVE = ["state", "facts", "review-actions", "timeline-section"];
  function refresh() {
    fetch(location.pathname + log.dataset.live, { headers: { Accept: "text/html" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        LIVE.forEach(function (id) {
          var now = document.getElementById(id), got = fresh.getElementById(id);
          if (now && got) now.replaceWith(document.importNode(got, true));
        });
        var pending = document.getElementById("diff-pending");
        if (pending && fresh.getElementById("diff-ready")) {
          pending.innerHTML = 'The diff is ready: <a href="">reload the page</a> to see it.';
        }
      })
      .catch(function () { setTimeout(refresh, 2000); });
  }
  if (!finished) setTimeout(function () { poll(false); }, 1000);

  var tools = document.querySelector(".js-only");
  if (tools) {
    tools.hidden = false;
    function all(open) {
      document.querySelectorAll("details.resource").forEach(function (d) { d.open = open; });
    }
    document.getElementById("expand-all").addEventListener("click", function () { all(true); });
    document.getElementById("collapse-all").addEventListener("click", function () { all(false); });
  }
})();
