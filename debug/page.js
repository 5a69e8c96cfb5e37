// The live view's refresh: every data-refresh-ms, it fetches the page's
// own URL with format=fragment and puts the answer in place of #view, so
// that the page updates without a reload. It fetches nothing else, and
// nothing while the page is hidden. body's data-updates counts the
// refreshes.
(function () {
	"use strict";
	var body = document.body;
	var view = document.getElementById("view");
	var status = document.getElementById("status");
	var every = Number(body.dataset.refreshMs) || 1000;
	var url = new URL(window.location.href);
	url.searchParams.set("format", "fragment");
	var updates = 0;
	function later() {
		window.setTimeout(tick, every);
	}
	function tick() {
		if (document.hidden) {
			later();
			return;
		}
		window.fetch(url, { cache: "no-store", credentials: "same-origin" })
			.then(function (r) {
				if (!r.ok) {
					throw new Error("HTTP " + r.status);
				}
				return r.text();
			})
			.then(function (html) {
				view.innerHTML = html;
				updates++;
				body.dataset.updates = String(updates);
				status.textContent = "";
			})
			.catch(function (e) {
				status.textContent = "refresh failed: " + e.message;
			})
			.finally(later);
	}
	later();
})();
