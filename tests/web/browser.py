"""A real Chromium for tests/web.rs, driven through chromedriver by Selenium.

Reads one JSON command a line on stdin and answers each with one JSON line
on stdout, so that the Rust test holds every assertion. Commands:
open(url), read() (what the page shows, cell by cell), type(selector,
text), click(selector), size(width, height), screenshot(path), console()
(the browser's log), cookies(), quit().
"""
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

# What the page shows, gathered in the page: text as a person sees it,
# beside the data-value each figure carries.
READ = """
const q = (s, r) => [...(r || document).querySelectorAll(s)];
const text = (s) => { const e = document.querySelector(s); return e ? e.textContent : null; };
return {
  title: document.title,
  status: text('#status'),
  count: text('#count'),
  signin: !!document.querySelector('form[action="login"]'),
  failed: text('#failed'),
  pwned: window.pwned === undefined ? null : String(window.pwned),
  cookie: document.cookie,
  hosts: q('details.host').map((h) => ({
    name: h.dataset.host,
    state: h.dataset.state,
    open: h.open,
    status: h.querySelector('.host-status').textContent,
    figures: h.querySelector('.host-figures') ? h.querySelector('.host-figures').textContent : null,
    gpus: q('.gpu', h).length,
  })),
  hostColumn: q('#table th[data-key=host]').some((th) => !th.hidden),
  gpus: q('.gpu').map((g) => ({
    host: g.dataset.host || null,
    index: Number(g.dataset.index),
    name: g.querySelector('.gpu-name').textContent,
    mem: g.querySelector('.mem').textContent,
    used: g.querySelector('.mem').dataset.used,
    total: g.querySelector('.mem').dataset.total,
    stats: Object.fromEntries(q('.stat', g).map((s) => [s.dataset.stat, {text: s.textContent, value: s.dataset.value}])),
    health: g.querySelector('.health').textContent,
    segments: q('.seg', g).map((s) => ({pid: s.dataset.pid || null, title: s.title, width: s.style.width})),
    legend: q('.legend li', g).map((l) => l.textContent),
    samples: Number(g.querySelector('.spark').dataset.samples),
  })),
  rows: q('#table tbody tr').map((tr) => ({
    pid: Number(tr.dataset.pid),
    host: tr.dataset.host || null,
    cells: Object.fromEntries(q('td', tr).map((td) => [td.dataset.key, {text: td.textContent, value: td.dataset.value}])),
  })),
  detail: document.getElementById('detail') && !document.getElementById('detail').hidden
    ? document.getElementById('detail').textContent : null,
  scripts: q('script').map((s) => s.getAttribute('src')),
};
"""


def main():
    chromium, chromedriver = sys.argv[1], sys.argv[2]
    options = Options()
    options.binary_location = chromium
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--no-first-run", "--password-store=basic"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    try:
        for line in sys.stdin:
            cmd = json.loads(line)
            try:
                out = run(driver, cmd)
            except Exception as e:  # the test reads the error and fails with it
                out = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(out), flush=True)
            if cmd["do"] == "quit":
                break
    finally:
        driver.quit()


def run(driver, cmd):
    do = cmd["do"]
    if do == "open":
        driver.get(cmd["url"])
        return {}
    if do == "read":
        return driver.execute_script(READ)
    if do == "type":
        e = driver.find_element(By.CSS_SELECTOR, cmd["selector"])
        e.clear()
        e.send_keys(cmd["text"])
        return {}
    if do == "click":
        # Found and clicked in one step: the page redraws its table every
        # interval, so an element found first may be gone by the click.
        found = driver.execute_script(
            "const e = document.querySelector(arguments[0]); if (e) e.click(); return !!e;", cmd["selector"])
        return {} if found else {"error": f"nothing matches {cmd['selector']}"}
    if do == "size":
        driver.set_window_size(cmd["width"], cmd["height"])
        return {}
    if do == "screenshot":
        driver.save_screenshot(cmd["path"])
        return {}
    if do == "console":
        return {"entries": driver.get_log("browser")}
    if do == "cookies":
        return {"cookies": driver.get_cookies()}
    if do == "quit":
        return {}
    return {"error": f"no command {do}"}


if __name__ == "__main__":
    main()
