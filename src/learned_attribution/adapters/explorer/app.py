"""The explorer's web app (`learned-attribution explore`, docs/explorer.md): pages rendered on the server from
Jinja2 templates, a small script for annotating and refitting, every asset served from this package (no CDN). The
routes translate requests to `services.explore.Explorer` calls; bad input answers one line (HTTP 400 in the JSON API,
the page's message otherwise), never a stack trace."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlencode

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from learned_attribution.core.data.classes import resolve_class
from learned_attribution.core.errors import InputError
from learned_attribution.core.explainers import METHODS
from learned_attribution.core.explainers.learned import EXPNET_PLUS
from learned_attribution.services.explore.explorer import Explorer
from learned_attribution.services.explore.fold_view import FILTERS, MODES, MissingFoldOutputs
from learned_attribution.services.explore.workspace import RefitRunning
from learned_attribution.services.reporting.pages import heat_levels

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
# A diverging scale readable with the common colour-vision deficiencies (ColorBrewer's PuOr): orange for the class
# explained, purple against it; an unsigned score is orange from white.
FOR, AGAINST = (230, 97, 1), (94, 60, 153)
DEFAULT_K = 8


def display_tokens(tokens: Sequence[str]) -> list[tuple[str, bool]]:
    """Subword tokens as read: each with whether a space comes before it (WordPiece `##` continues a word,
    SentencePiece `▁` and byte-level `Ġ` start one)."""
    shown = []
    for index, token in enumerate(tokens):
        if token.startswith("##"):
            shown.append((token[2:], False))
        elif token[:1] in ("▁", "Ġ"):
            shown.append((token[1:] or token, index > 0))
        else:
            shown.append((token, index > 0))
    return shown


def heat_cells(pieces: Sequence[tuple[str, bool]], scores: Sequence[float | None], signed: bool,
               marked: Sequence[int] | None = None) -> list[dict]:
    """A row's cells: each piece's background from its score (`heat_levels`: orange for and purple against the
    class; unsigned: orange), the score in its tooltip, and the human rationale's words (`marked`) underlined."""
    cells = []
    for index, ((text, space), score, level) in enumerate(zip(pieces, scores, heat_levels(scores, signed))):
        cell: dict[str, Any] = {"text": text, "space": space, "gold": bool(marked and marked[index])}
        if level is None:
            cell.update(title="no score", style="", none=True)
        else:
            alpha, against = level
            rgb = AGAINST if against else FOR
            cell.update(title=f"{score:.4f}", none=False,
                        style=f"background:rgba({rgb[0]},{rgb[1]},{rgb[2]},{alpha:.2f})"
                              + (";color:#fff" if alpha > 0.6 and against else ""))
        cells.append(cell)
    return cells


def explanation_rows(explanation, methods: Sequence[str], marked: Sequence[int] | None = None) -> dict:
    """An `Explanation` as the explain and refit templates show it: its words with their spacing, one row of cells
    per method, the words a person marked (`marked`, 0/1 per word) underlined."""
    offsets = explanation.offsets
    pieces = [(word, bool(index) and (offsets is None or offsets[index][0] > offsets[index - 1][1]))
              for index, word in enumerate(explanation.words)]
    return {"explanation": explanation, "record": explanation.record(),
            "rows": [{"method": m, "cells": heat_cells(pieces, explanation.word_scores[m],
                                                       m in METHODS and METHODS[m].signed, marked)}
                     for m in methods if m in explanation.word_scores]}


def create_app(explorer: Explorer) -> FastAPI:
    """The app over one `Explorer` (its data folder)."""
    app = FastAPI(title="learned-attribution explorer", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.globals.update(FOR=FOR, AGAINST=AGAINST)

    def page(request: Request, name: str, status: int = 200, **context) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"data_root": explorer.data_root, **context},
                                          status_code=status)

    def problem_page(request: Request, fold: str | None, error: Exception) -> HTMLResponse:
        status = 404 if isinstance(error, MissingFoldOutputs) else 400
        return page(request, "problem.html", status, fold=fold, message=" ".join(str(error).split()))

    def api_error(error: Exception, status: int = 400) -> JSONResponse:
        return JSONResponse({"error": " ".join(str(error).split())}, status_code=status)

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request):
        return page(request, "index.html", folds=explorer.folds())

    @app.get("/fold/{fold}", response_class=HTMLResponse)
    def fold_page(request: Request, fold: str, mode: str = "predicted", filter: str = "all",
                  label: str = Query("", alias="class"), sort: str = "id", method: str = "",
                  versus: str = "", order: str = "asc", page_number: str = Query("1", alias="page"),
                  example: str = ""):
        try:
            if not page_number.isdigit():
                raise InputError(f"page={page_number!r}: a page number (1, 2, ...)")
            view = explorer.view(fold)
            label_index = resolve_class(label, view.classes, "class") if label else None
            result = view.query(mode, filter, label_index, sort, method or None, versus or None, order == "desc",
                                int(page_number))
            focused = view.example(example, mode, method or None, versus or None) if example else None
            summary = view.summary(mode, filter, label_index)
        except InputError as error:
            return problem_page(request, fold, error)
        state = {"mode": mode, "filter": filter, "class": label, "sort": sort, "method": method,
                 "versus": versus, "order": order, "example": example}

        def url(**changes) -> str:
            query = {k: v for k, v in {**state, "page": result.page, **changes}.items() if v not in ("", None)}
            return f"/fold/{fold}?{urlencode(query)}"

        for item in result.examples + ([focused] if focused else []):
            pieces = display_tokens(item["tokens"])
            item["gold_cells"] = [{"text": t, "space": s, "gold": bool(g)} for (t, s), g in zip(pieces, item["gold"])]
            for row in item["rows"]:
                row["cells"] = heat_cells(pieces, row["scores"], row["signed"], item["gold"])
            item["url"] = url(example=item["example_id"])
        counts = {"all": len(view.examples), "mispredicted": int((~view.examples["correct"]).sum())}
        return page(request, "fold.html", fold=fold, view=view, result=result, focused=focused, state=state,
                    url=url, modes=MODES, filters=FILTERS, counts=counts, summary=summary)

    @app.get("/fold/{fold}/explain", response_class=HTMLResponse)
    def explain_page(request: Request, fold: str, text: str = "", method: list[str] = Query(default=[]),
                     target: str = "", contrast: str = ""):
        try:
            explainer = explorer.explainer(fold)
            methods = method or explainer.default_methods
            shown = None
            if text.strip():
                explanations = explorer.explain(fold, [text], methods, target, contrast)
                shown = explanation_rows(explanations[0], methods)
        except InputError as error:
            return problem_page(request, fold, error)
        download = f"/api/fold/{fold}/explain?" + urlencode({"text": text, "method": methods, "target": target,
                                                              "contrast": contrast, "download": 1}, doseq=True)
        return page(request, "explain.html", fold=fold, text=text, methods=methods, all_methods=explainer.methods,
                    classes=explainer.classes, target=target, contrast=contrast, shown=shown, download=download)

    @app.get("/api/fold/{fold}/explain")
    def explain_api(fold: str, text: list[str] = Query(default=[]), method: list[str] = Query(default=[]),
                    target: str = "", contrast: str = "", download: int = 0):
        try:
            if not [t for t in text if t.strip()]:
                raise InputError("give at least one non-empty text (text=...)")
            explanations = explorer.explain(fold, text, method, target, contrast)
        except InputError as error:
            return api_error(error)
        body = json.dumps([e.record() for e in explanations], ensure_ascii=False, indent=1)
        headers = {"Content-Disposition": f'attachment; filename="{fold}_explanation.json"'} if download else {}
        return Response(body, media_type="application/json", headers=headers)

    @app.get("/fold/{fold}/annotate", response_class=HTMLResponse)
    def annotate_page(request: Request, fold: str, session: str = ""):
        try:
            explainer = explorer.explainer(fold)
            suggested = explorer.workspace.suggested(fold, session) if session else None
            saved = explorer.workspace.annotations(fold, session) if session else []
            plan = explorer.fewshot_plan(fold, len(saved) or (suggested["k"] if suggested else DEFAULT_K))
            comparison = explorer.comparison(fold, session) if session else None
            job = explorer.jobs.job(fold, session) if session else None
        except InputError as error:
            return problem_page(request, fold, error)
        if comparison:  # the annotator's marks underlined (none on a text left out)
            marks = {a["id"]: a["words"] for a in saved}
            comparison["rows"] = []
            for item, (before, after) in zip(suggested["items"], comparison["pairs"]):
                marked = [int(w in marks.get(item["id"], ())) for w in range(len(item["words"]))]
                comparison["rows"].append((explanation_rows(before, [EXPNET_PLUS], marked),
                                           explanation_rows(after, [EXPNET_PLUS], marked)))
        return page(request, "annotate.html", fold=fold, session=session, suggested=suggested, saved=saved,
                    plan=plan, comparison=comparison, classes=explainer.classes, default_k=DEFAULT_K,
                    job=job.record() if job else None,
                    state_json=json.dumps({"fold": fold, "session": session, "suggested": suggested,
                                           "saved": saved, "classes": explainer.classes,
                                           "job": job.record() if job else None}, ensure_ascii=False).replace("</", "<\\/"))

    @app.post("/api/fold/{fold}/sessions")
    async def new_session(fold: str, request: Request):
        try:
            body = await _json_body(request)
            k = body.get("k", DEFAULT_K)
            if isinstance(k, bool) or not isinstance(k, int):
                raise InputError(f"k={k!r}: must be a positive integer")
            session = await _in_thread(explorer.start_session, fold, str(body.get("filename", "")),
                                       str(body.get("content", "")), k)
        except InputError as error:
            return api_error(error)
        return {"session": session, "url": f"/fold/{fold}/annotate?session={session}"}

    @app.post("/api/fold/{fold}/sessions/{session}/annotations")
    async def save_annotations(fold: str, session: str, request: Request):
        try:
            body = await _json_body(request)
            annotations = body.get("annotations")
            if not isinstance(annotations, list):
                raise InputError("'annotations' must be a list of {id, text, words, label}")
            path = explorer.workspace.save_annotations(fold, session, annotations)
        except InputError as error:
            return api_error(error)
        return {"saved": len(annotations), "file": str(path.relative_to(explorer.data_root)),
                "plan": explorer.fewshot_plan(fold, len(annotations))}

    @app.post("/api/fold/{fold}/sessions/{session}/refit")
    def start_refit(fold: str, session: str):
        try:
            job = explorer.refit(fold, session)
        except InputError as error:
            return api_error(error, 409 if isinstance(error, RefitRunning) else 400)
        return job.record()

    @app.get("/api/fold/{fold}/sessions/{session}/refit")
    def refit_status(fold: str, session: str):
        try:
            explorer.workspace.session_folder(fold, session)
        except InputError as error:
            return api_error(error)
        job = explorer.jobs.job(fold, session)
        return job.record() if job else {"state": "none"}

    return app


async def _json_body(request: Request) -> dict:
    # JSON only: a cross-site form (text/plain, no preflight) cannot then make this local server write anything.
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise InputError("send the request body as JSON (Content-Type: application/json)")
    try:
        body = await request.json()
    except ValueError as error:
        raise InputError(f"the request body is not JSON ({error})") from error
    if not isinstance(body, dict):
        raise InputError("the request body must be a JSON object")
    return body


async def _in_thread(function, *args):
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(function, *args)
