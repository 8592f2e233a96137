"""Drives the job's web page in headless Chromium (selenium + Debian's chromium-driver)
and checks what a person would see: the graph and the operators, numbers that move, a
row per checkpoint, a savepoint refused without the token and taken with it.

usage: page.py ADDRESS TOKEN OPERATOR[,OPERATOR...] SCREENSHOT_DIR
Prints one JSON line of what it saw; exits non-zero naming the first check that failed.
"""

import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

address, token, operators, shots = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4]
os.makedirs(shots, exist_ok=True)


def fail(message):
    print(f"page check failed: {message}", file=sys.stderr)
    sys.exit(1)


def wait_for(what, check, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            value = check()
        except Exception:  # the page may be re-rendering the element
            value = None
        if value:
            return value
        time.sleep(0.2)
    fail(f"timed out waiting for {what}")


options = webdriver.ChromeOptions()
options.binary_location = os.environ.get("RIFFLE_CHROMIUM", "/usr/bin/chromium")
for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1900"]:
    options.add_argument(flag)
service = Service(executable_path=os.environ.get("RIFFLE_CHROMEDRIVER", "/usr/bin/chromedriver"))
driver = webdriver.Chrome(options=options, service=service)
seen = {}
try:
    # Without the token: the page reads the job (loopback) but a savepoint is refused.
    driver.get(f"http://{address}/")
    wait_for("the operators table", lambda: len(driver.find_elements(By.CSS_SELECTOR, "#operators tbody tr")) == len(operators))
    driver.find_element(By.ID, "take").click()
    refused = wait_for("a refusal", lambda: driver.find_element(By.CSS_SELECTOR, "#action-result.error").text)
    if "token" not in refused:
        fail(f"refusal without the token does not mention it: {refused!r}")
    if not driver.find_element(By.ID, "token-field").is_displayed():
        fail("the token field is not offered after a refusal")
    seen["refused"] = refused

    # With the token, as the job prints the URL.
    driver.get("about:blank")
    driver.get(f"http://{address}/#token={token}")
    wait_for("the operators table", lambda: len(driver.find_elements(By.CSS_SELECTOR, "#operators tbody tr")) == len(operators))
    if "token=" in driver.current_url:
        fail("the token stays in the address bar")
    for op in operators:
        if not driver.find_elements(By.CSS_SELECTOR, f'#operators tr[data-operator="{op}"]'):
            fail(f"operator {op} is not in the table")
        if not driver.find_elements(By.CSS_SELECTOR, f'#graph g.node[data-operator="{op}"]'):
            fail(f"operator {op} is not in the graph")
    edges = driver.find_elements(By.CSS_SELECTOR, "#graph path.edge")
    if len(edges) < len(operators) - 1:
        fail(f"{len(edges)} edges for {len(operators)} operators")
    source = operators[0]

    def rows_out():
        text = driver.find_element(By.CSS_SELECTOR, f'#operators tr[data-operator="{source}"] .rows-out').text
        return int(text.replace(",", "")) if text not in ("", "–") else None

    first = wait_for("rows out of the source", rows_out)
    second = wait_for("rows out of the source to grow", lambda: (lambda n: n if n and n > first else None)(rows_out()), timeout=20)
    rate = wait_for("a rate for the source", lambda: (lambda t: t if t not in ("", "–") else None)(
        driver.find_element(By.CSS_SELECTOR, f'#operators tr[data-operator="{source}"] .rate-out').text))
    seen["rows_out"] = [first, second]
    seen["rate_out"] = rate

    # The tables are drawn anew every few seconds: read one whole in a single script,
    # so that it cannot be redrawn halfway through the reading.
    def checkpoint_rows():
        rows = driver.execute_script(
            "return [...document.querySelectorAll('#checkpoints tr.checkpoint')].map(r =>"
            " [r.dataset.epoch, r.querySelector('.slowest-task')?.textContent ?? '',"
            "  r.querySelector('.requests')?.textContent ?? ''])")
        return rows if len(rows) >= 2 else None

    checkpoints = wait_for("two checkpoint rows", checkpoint_rows)
    epochs = [epoch for epoch, _, _ in checkpoints]
    if len(set(epochs)) != len(epochs):
        fail(f"a checkpoint is listed twice: {epochs}")
    _, slowest, requests = checkpoints[0]
    if not any(slowest.startswith(op + "[") for op in operators):
        fail(f"the slowest task names no operator: {slowest!r}")
    if not requests.isdigit():
        fail(f"no request count for the newest checkpoint: {requests!r}")
    wait_for("a bar in the checkpoint chart", lambda: driver.find_elements(By.CSS_SELECTOR, "#chart rect.bar"))
    recovery = wait_for("the recovery record", lambda: (lambda t: t if "generation" in t else None)(
        driver.find_element(By.CSS_SELECTOR, "#recovery li.recovery").text))
    seen["checkpoints"] = len(epochs)
    seen["recovery"] = recovery
    driver.save_screenshot(os.path.join(shots, "page-running.png"))

    # A savepoint from the page.
    driver.find_element(By.ID, "label").send_keys("from-page")
    driver.find_element(By.ID, "take").click()
    done = wait_for("the savepoint", lambda: (lambda t: t if "savepoint from-page at epoch" in t else None)(
        driver.find_element(By.ID, "action-result").text), timeout=60)
    wait_for("the savepoint in the list", lambda: driver.find_elements(By.CSS_SELECTOR, '#savepoints tr.savepoint[data-label="from-page"]'))
    seen["savepoint"] = done
    driver.save_screenshot(os.path.join(shots, "page-savepoint.png"))
    print(json.dumps(seen))
finally:
    driver.quit()
