// The rollout page's waits count down: every element with data-until (an ISO time) shows the
// time left, worded as the server words it (gateway/rolloutview.py `_left_s`). When a wait
// ends the rollout moves on by itself, so the page is loaded again a few seconds later.
(function () {
  var waits = Array.prototype.slice.call(document.querySelectorAll("[data-until]"));
  if (!waits.length) return;
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function words(seconds) {
    var days = Math.floor(seconds / 86400), rest = seconds % 86400;
    var hours = Math.floor(rest / 3600), minutes = Math.floor((rest % 3600) / 60);
    var secs = rest % 60;
    if (days) return days + "d " + hours + "h";
    if (hours) return hours + "h " + pad(minutes) + "m";
    return minutes ? minutes + "m " + pad(secs) + "s" : secs + "s";
  }
  var reloading = false;
  function tick() {
    var now = Date.now();
    waits.forEach(function (el) {
      var left = Math.max(0, Math.floor((Date.parse(el.dataset.until) - now) / 1000));
      el.textContent = words(left);
      if (left === 0 && !reloading) {
        reloading = true;
        setTimeout(function () { location.reload(); }, 5000);
      }
    });
  }
  tick();
  setInterval(tick, 1000);
})();
