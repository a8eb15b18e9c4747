"""The explorer in a real browser (Playwright driving Debian's chromium) on the smoke main job's SST-2 fold: browse,
filter, explain typed text for a chosen class, annotate 8 suggested texts, refit, see the new map; two sessions at
once; and the bad input of its issue, each checked on what the page or the API answers."""
from __future__ import annotations

import asyncio
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from learned_attribution.adapters.explorer.browser import chromium_path, launch

pytest.importorskip("playwright", reason="the dev extra installs playwright")
pytestmark = pytest.mark.skipif(chromium_path() is None, reason="no chromium: apt-get install chromium (README)")

FOLD, TASK = "heldout_sst2", "sst2"
TEXTS = ["A gutsy and exhilarating movie .", "The plot is thin and the pacing slow .",
         "Warm , funny and wise .", "A tedious mess from start to finish .", "I loved every minute of it .",
         "Dull characters and a predictable ending .", "One of the best films of the year .",
         "It never finds its footing .", "A quiet , moving portrait of grief .", "Too long and too loud .",
         "Charming performances lift a slight story .", "An unfunny comedy with no ideas ."]


def copy_fold_outputs(source: Path, destination: Path) -> Path:
    """The SST-2 fold's outputs of a run (no few-shot choice: the refit's default path), nothing of the others."""
    for part in (f"06_models/{FOLD}", f"06_models/classifier_{TASK}"):
        shutil.copytree(source / part, destination / part, ignore=shutil.ignore_patterns("fewshot", "*.partial"))
    for name in ("07_model_output/token_scores", "07_model_output/gold_token_scores",
                 "07_model_output/rationale_predictions", "02_intermediate/examples"):
        target = destination / f"{name}_{TASK}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / f"{name}_{TASK}.parquet", target)
    return destination


@pytest.fixture(scope="module")
def explorer_data(smoke_crosstask_run, tmp_path_factory) -> Path:
    return copy_fold_outputs(smoke_crosstask_run, tmp_path_factory.mktemp("explorer") / "data")


@pytest.fixture(scope="module")
def explorer(explorer_data):
    from learned_attribution.services.explore.explorer import Explorer

    return Explorer(explorer_data, device="cpu")


@pytest.fixture(scope="module")
def url(explorer):
    from learned_attribution.adapters.explorer.server import running

    explorer.preload()
    with running(explorer) as address:
        yield address


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


def test_browse_filter_explain_annotate_refit_and_see_the_new_map(page, url, explorer, explorer_data, tmp_path):
    predictions = pd.read_parquet(explorer_data / "07_model_output" / f"rationale_predictions_{TASK}.parquet")
    scored = set(pd.read_parquet(explorer_data / "07_model_output" / f"token_scores_{TASK}.parquet")["example_id"])
    examples = predictions[predictions["example_id"].isin(scored)].drop_duplicates("example_id")
    n_wrong = int((~examples["correct"]).sum())
    assert n_wrong > 0, "the smoke fold has no mispredicted example to filter to"

    # 1. Open the fold: its examples, each with the human rationale and every method's row.
    page.goto(f"{url}/")
    page.click(f"a[href='/fold/{FOLD}']")
    assert page.locator("h1").inner_text().startswith(FOLD)
    assert page.locator("#count").inner_text().startswith(f"{len(examples)} examples match")
    first = page.locator("section.example").first
    assert first.locator("tr.human-row").count() == 1
    assert first.locator("tr[data-method='expnet_plus'] .t").first.get_attribute("title") not in (None, "no score")

    # 2. Mispredicted only: the count and every example shown say so, and the URL reopens the same view.
    page.select_option("#filter", "mispredicted")
    page.click("#apply")
    page.wait_for_url("**filter=mispredicted**")
    assert page.locator("#count").inner_text().startswith(f"{n_wrong} examples match")
    verdicts = page.locator("section.example .verdict").all_inner_texts()
    assert verdicts and all("(mispredicted)" in v for v in verdicts)
    # The mean AUROC of the matching examples, over those where it is defined (both kinds of token marked).
    scores = pd.read_parquet(explorer_data / "07_model_output" / f"token_scores_{TASK}.parquet")
    wrong_ids = set(examples.loc[~examples["correct"], "example_id"])
    defined = scores[(scores["method"] == "expnet_plus") & scores["example_id"].isin(wrong_ids)
                     & scores["gold"].map(lambda gold: 0 < sum(gold) < len(gold))]
    summary = page.locator("#summary tr[data-method='expnet_plus'] td")
    assert summary.nth(1).text_content() == f"{len(defined)} examples" and "[" in summary.nth(2).text_content()
    example_link = page.locator("section.example a.permalink").first
    example_id = example_link.inner_text()
    example_link.click()
    page.wait_for_url("**example=**")
    assert page.locator("section.example.focused a.permalink").inner_text() == example_id
    shared = page.url
    page.goto(shared)  # a shared address reopens the same fold, filter and example
    assert page.locator("section.example.focused a.permalink").inner_text() == example_id
    assert page.locator("#filter").input_value() == "mispredicted"
    assets = page.eval_on_selector_all("script[src], link[href], img[src]",
                                       "nodes => nodes.map(n => n.getAttribute('src') || n.getAttribute('href'))")
    assert assets and all(a.startswith("/static/") for a in assets)  # offline: every asset served by the app
    page.select_option("select[name='mode']", "gold")  # the class the humans marked: a mispredicted one's gold
    page.click("#apply")
    page.wait_for_url("**mode=gold**")
    focused = page.locator("section.example.focused")
    gold_class = focused.locator(".verdict").inner_text().split(" · ")[0].removeprefix("gold ")
    assert focused.locator(".explained").inner_text() == f"explaining: {gold_class}"

    # An example opens in the explain page, to be explained for any class.
    page.click("section.example.focused a.retarget")
    assert page.locator("#text").input_value() == examples.set_index("example_id").at[example_id, "text"]

    # 3. Explain a typed text for a chosen class (not the predicted one), with a contrast, and download the JSON.
    page.click("#nav-explain")
    text = "The acting is wonderful but the script is lazy ."
    page.fill("#text", text)
    predicted = explorer.explain(FOLD, [text])[0].label
    other = next(c for c in explorer.explainer(FOLD).classes if c != predicted)
    page.select_option("#target", other)
    page.select_option("#contrast", predicted)
    page.check("input[name='method'][value='saliency']")
    page.click("#explain")
    assert page.locator("#explained-class").inner_text() == other
    assert page.locator("#contrast-class").inner_text() == predicted
    assert page.locator("#predicted").inner_text() == predicted
    row = page.locator("#explained tr[data-method='saliency'] .t")
    assert [w.strip() for w in row.all_inner_texts()] == text.split()
    assert all(float(t) == float(t) for t in (row.nth(i).get_attribute("title") for i in range(row.count())))
    with page.expect_download() as download:
        page.click("#download")
    record = json.loads(Path(download.value.path()).read_text())[0]
    assert record["text"] == text and record["explained_label"] == other and record["contrast_label"] == predicted
    assert record["scores"]["saliency"] == pytest.approx(
        explorer.explain(FOLD, [text], ["saliency"], other, predicted)[0].word_scores["saliency"], abs=1e-6)

    # 4. Annotate 8 suggested texts (the curve's smallest k), clicking words and with the keyboard.
    texts_file = tmp_path / "my_reviews.txt"
    texts_file.write_text("\n".join(TEXTS) + "\n")
    page.click("#nav-annotate")
    assert "no few-shot choice stored for this fold" in page.locator("#plan").inner_text()
    assert "documented default" in page.locator("#plan").inner_text()
    page.set_input_files("#texts-file", str(texts_file))
    page.fill("#k", "8")
    page.click("#suggest")
    page.wait_for_url("**session=**")
    items = page.locator(".item")
    assert items.count() == 8
    for index in range(8):
        words = items.nth(index).locator(".w")
        if index % 2:
            words.nth(1).click()
        else:  # the keyboard: focus the first word, move right, mark with Space
            words.nth(0).focus()
            page.keyboard.press("ArrowRight")
            page.keyboard.press("Space")
        assert items.nth(index).locator(".w.marked").count() == 1
    page.click("#save")
    page.wait_for_selector("#message:has-text('saved 8 annotations')")
    session = page.url.split("session=")[1]
    saved = explorer_data / "09_explorer" / FOLD / "sessions" / session / "annotations.jsonl"
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    assert len(lines) == 8 and all(len(line["spans"]) == 1 for line in lines)
    from learned_attribution.core.data.rationales import read_rationale_file

    tokenizer = explorer.explainer(FOLD).classifier.tokenizer
    read = read_rationale_file(saved, class_names=explorer.explainer(FOLD).classes, tokenizer=tokenizer)
    assert sorted(read["word_rationale"].map(sum)) == [1] * 8  # what `fit --rationales` reads: one word each

    # 5. Refit, with a progress bar; 6. the new map beside the previous one on the same texts.
    page.click("#refit")
    page.wait_for_selector("#comparison", timeout=240_000)
    assert page.locator("#comparison tr.after").count() == 8
    before = page.locator("#comparison tr:not(.after) .t").evaluate_all("cells => cells.map(c => c.title)")
    after = page.locator("#comparison tr.after .t").evaluate_all("cells => cells.map(c => c.title)")
    assert len(before) == len(after) and before != after  # the refit moved the map
    refit = explorer_data / "09_explorer" / FOLD / "sessions" / session / "refit_1"
    card = json.loads((refit / "fold.json").read_text())
    assert card["fewshot"]["n_examples"] == 8 and card["fewshot"]["k"] is None  # the default, as the page said


def test_two_browser_sessions_at_once_get_their_own_results(url, explorer):
    from playwright.async_api import async_playwright

    texts = ["A gutsy and exhilarating movie .", "Dull characters and a predictable ending ."]

    async def explain_in(browser, text: str) -> list[str]:
        context = await browser.new_context()
        page = await context.new_page()
        await page.goto(f"{url}/fold/{FOLD}/explain")
        await page.fill("#text", text)
        await page.click("#explain")
        words = await page.locator("#explained tr[data-method='expnet_plus'] .t").all_inner_texts()
        await context.close()
        return [w.strip() for w in words]

    async def both() -> list[list[str]]:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium_path(),
                                                      args=["--headless=new", "--no-sandbox", "--disable-gpu"])
            try:
                return await asyncio.wait_for(asyncio.gather(*(explain_in(browser, t) for t in texts)), 120)
            finally:
                await browser.close()

    # Its own thread: the module's synchronous Playwright holds this one's event loop.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, both()).result(timeout=180) == [t.split() for t in texts]


def test_a_data_folder_without_a_folds_outputs_names_the_command(page, url, explorer_data):
    page.goto(f"{url}/")
    assert "kedro run --pipeline crosstask" in page.locator("ul.folds").inner_text()  # cola and hatexplain: absent
    response = page.goto(f"{url}/fold/heldout_cola")
    assert response.status == 404
    message = page.locator("#problem").inner_text()
    assert "no outputs of fold heldout_cola" in message and "kedro run --pipeline crosstask" in message
    assert "Traceback" not in page.content()


def test_annotations_are_refused_with_the_text_id_and_nothing_leaves_the_data_folder(url, explorer, explorer_data,
                                                                                        tmp_path):
    import httpx

    api = f"{url}/api/fold/{FOLD}"
    body = {"filename": "reviews.txt", "content": "\n".join(TEXTS), "k": 8}
    session = httpx.post(f"{api}/sessions", json=body, timeout=120).json()["session"]
    item = explorer.workspace.suggested(FOLD, session)["items"][0]
    save = f"{api}/sessions/{session}/annotations"

    changed = httpx.post(save, json={"annotations": [{**_annotation(item), "text": item["text"] + " !"}]})
    assert changed.status_code == 400 and f"text {item['id']}: its text has changed" in changed.json()["error"]
    empty = httpx.post(save, json={"annotations": [{**_annotation(item), "words": []}]})
    assert empty.status_code == 400 and f"text {item['id']}: no word marked" in empty.json()["error"]
    assert not (explorer_data / "09_explorer" / FOLD / "sessions" / session / "annotations.jsonl").exists()

    outside = tmp_path.parent
    before = sorted(p.name for p in outside.iterdir())
    for filename in ("../../escaped.txt", "..", "/tmp/escaped.txt", "..\\escaped.txt"):
        answer = httpx.post(f"{api}/sessions", json={**body, "filename": filename})
        assert answer.status_code == 400 and "plain file name" in answer.json()["error"]
    form = httpx.post(f"{api}/sessions", content=json.dumps(body), headers={"Content-Type": "text/plain"})
    assert form.status_code == 400 and "as JSON" in form.json()["error"]  # what a cross-site form could send
    traversal = httpx.post(f"{url}/api/fold/..%2F..%2Fx/sessions", json=body)
    assert traversal.status_code in (400, 404)
    bad_session = httpx.post(f"{api}/sessions/..%2F..%2F/annotations", json={"annotations": []})
    assert bad_session.status_code in (400, 404)
    assert sorted(p.name for p in outside.iterdir()) == before
    assert not list(explorer_data.parent.glob("**/escaped.txt"))


def test_a_failed_refit_shows_its_error_and_keeps_the_previous_explainer(page, url, explorer, explorer_data):
    import httpx

    # Texts whose ids are the fold's test examples: the refit refuses to fit on what it is scored on.
    test_ids = pd.read_parquet(explorer_data / "07_model_output" / f"rationale_predictions_{TASK}.parquet")
    test_ids = test_ids.loc[test_ids["role"] == "rationale_test", "example_id"].tolist()[:8]
    content = "\n".join(json.dumps({"id": i, "text": t}) for i, t in zip(test_ids, TEXTS))
    api = f"{url}/api/fold/{FOLD}"
    session = httpx.post(f"{api}/sessions", json={"filename": "leaky.jsonl", "content": content, "k": 8},
                         timeout=120).json()["session"]
    items = explorer.workspace.suggested(FOLD, session)["items"]
    assert httpx.post(f"{api}/sessions/{session}/annotations",
                      json={"annotations": [_annotation(i) for i in items]}).status_code == 200
    page.goto(f"{url}/fold/{FOLD}/annotate?session={session}")
    page.click("#refit")
    page.wait_for_selector("#message:has-text('refit failed')", timeout=120_000)
    message = page.locator("#message").inner_text()
    assert "are test examples" in message and "previous explainer stays in use" in message
    assert "\n" not in message.strip() and "Traceback" not in message
    assert explorer.workspace.current_refit(FOLD, session) == (None, None)
    assert not list((explorer_data / "09_explorer" / FOLD / "sessions" / session).glob("refit_*"))


def test_a_tab_closed_during_a_refit_leaves_a_whole_fold_folder(browser, url, explorer, explorer_data):
    import httpx

    api = f"{url}/api/fold/{FOLD}"
    session = httpx.post(f"{api}/sessions", json={"filename": "tab.txt", "content": "\n".join(TEXTS), "k": 8},
                         timeout=120).json()["session"]
    items = explorer.workspace.suggested(FOLD, session)["items"]
    httpx.post(f"{api}/sessions/{session}/annotations", json={"annotations": [_annotation(i) for i in items]})
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{url}/fold/{FOLD}/annotate?session={session}")
    page.click("#refit")
    page.wait_for_selector("progress:not([hidden])")
    context.close()  # the tab goes away mid-refit
    explorer.jobs.wait(timeout=240)
    job = explorer.jobs.job(FOLD, session).record()
    assert job["state"] == "done", job
    current, _ = explorer.workspace.current_refit(FOLD, session)
    assert current is not None and (current / "fold.json").is_file() and (current / "expnet_plus").is_dir()
    folder = explorer_data / "09_explorer" / FOLD / "sessions" / session
    assert not [p for p in folder.iterdir() if p.name.endswith(".partial") or ".tmp" in p.name]


def test_the_port_in_use_is_one_line_naming_it_and_the_flag(explorer_data):
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "learned_attribution.adapters.cli", "explore", "--data",
                               str(explorer_data), "--port", str(port)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: port {port} on 127.0.0.1 is in use: choose another with --port N"


def test_the_pages_benchmark_records_first_paint_and_takes_the_screenshots(explorer_data, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import explorer_pages
    from learned_attribution.services.record.runs import recorded_benchmark

    arguments = ["--data", str(explorer_data), "--fold", FOLD, "--repeats", "2", "--texts", "12",
                 "--output-dir", str(tmp_path), "--screenshots", str(tmp_path / "shots")]
    with ThreadPoolExecutor(1) as pool:  # its own thread: the module's synchronous Playwright holds this one's loop
        table = pool.submit(explorer_pages.main, arguments).result(timeout=600)
    assert list(table.groupby("view", sort=False).size()) == [2] * 5
    assert (table["first_contentful_paint_ms"] > 0).all() and (table["examples_shown"] > 0).all()
    run = recorded_benchmark(tmp_path, "explorer_first_paint")  # its table checked against its SHA-256
    assert list(run.files) == ["explorer_first_paint.csv"] and run.params["fold"] == FOLD
    assert sorted(p.name for p in (tmp_path / "shots").iterdir()) == ["annotate.png", "example.png", "explain.png",
                                                                      "fold.png"]
    from learned_attribution.services.reporting.explorer import first_paint_block

    block = first_paint_block(pd.read_csv(tmp_path / "explorer_first_paint.csv"))
    assert "| mispredicted | 2 |" in block and "Target, first paint within 2 s" in block


def _annotation(item: dict) -> dict:
    return {"id": item["id"], "text": item["text"], "words": [0], "label": item["label"]}
