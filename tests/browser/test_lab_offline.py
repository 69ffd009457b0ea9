"""JupyterLab as the browser tests start it: up, authenticated, and off the network."""

from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.browser


def test_lab_loads_without_leaving_loopback(lab_server, browser_page):
    outside = []

    def record(request):
        host = urlparse(request.url).hostname
        if request.url.startswith(("http:", "https:", "ws:", "wss:")) and host not in ("127.0.0.1", "localhost"):
            outside.append(request.url)

    browser_page.on("request", record)
    browser_page.goto(lab_server.notebook_url(""))
    browser_page.wait_for_selector(".jp-DirListing-content")
    listing = browser_page.locator(".jp-DirListing-item").all_inner_texts()
    assert any("00_dashboard.ipynb" in text for text in listing), listing
    assert outside == [], f"the Lab page asked hosts beyond loopback: {outside[:5]}"
    # the no-network flags reached the page: news is disabled in its config
    page_config = browser_page.evaluate("JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    assert page_config.get("news", {}).get("disabled") is True, page_config.get("news")
