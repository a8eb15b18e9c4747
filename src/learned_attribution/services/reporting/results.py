"""The results, written from the committed record of the runs' reports: `docs/results.md` and the READMEs' blocks.

    learned-attribution record add --pipeline crosstask   # a finished run's reports -> docs/record/reports
    learned-attribution results                           # docs/record -> docs/results.md + the READMEs' blocks
    learned-attribution results --reports data/smoke/08_reporting --output /tmp/results.md --readme none

Every number comes from a file a pipeline wrote under its reports folder (`crosstask_metrics.csv`,
`classifier_metrics.csv`, `expnet_plus_ablation.{csv,md}`, `crosstask_summary.md`, `crosstask/explain_cost_<task>.csv`,
`ablation/expnet_plus_selection_<task>.csv`, `node_timings/crosstask.csv`, `afn_report.md`, `fewshot.md`,
`fewshot_summary.csv`, ...), kept in the record with the identity of the run that wrote it (services/record/runs.py),
and from the record of every baseline on every example (docs/record/baselines). Each section and block names its run
(commit, date, kernels: the run's, so regenerating gives the same text); one table never mixes two runs' reports
(`Reports.source`), a comparison across runs is a table of its own and says so. A report that is missing leaves its
section out and the document says which; a README block whose table is missing is an error. Marked blocks
(`<!-- results:NAME -->` ... `<!-- /results:NAME -->`) in README.md, docs/fewshot.md, docs/amortize.md and docs/explorer.md
are rewritten in place.

Here: which reports there are (`Reports`), the document's sections and the blocks a README embeds; the tables of
what things cost are in `cost`, the in-place rewriting of marked blocks in `rewrite`.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from learned_attribution.core.atomic import write_text_atomically
from learned_attribution.core.tasks import FOLD_PREFIX, TASKS

from .afn import afn_comparison_table
from .amortize import STUDENT_TABLES, learning_curve_table, student_variants_table, students_table
from .cost import pareto_table, serving_table, stage_table, throughput_comparison_table, throughput_table
from .crosstask import (by_prediction_table, classifier_comparison_table, classifier_table, headline_table,
                        modes_table,
                        paper_comparison_table, shape_free_table, transfer_table)
from .explorer import first_paint_block
from .fewshot import fewshot_headline, suggestion_rules_block
from .rewrite import ResultsError, fill_marked_blocks
from .selection_rules import track_record_section
from ..record.parts import RecordError
from ..record.report import read_record, record_section, record_summary, record_table
from ..record.runs import (IDENTITY_FOLDER, RecordedRun, pipeline_of, read_identities, recorded_benchmark,
                           recorded_runs)


# Beside every number of ExpNet+ on the held-out folds: its recipe was chosen after held-out results were seen.
RECIPE_CAVEAT = ("ExpNet+'s recipe was chosen after held-out ablation results were seen (docs/choices.md, \"What each "
                 "choice of the main job was made on\"): its held-out numbers are not untouched test numbers.")
RECORD_SOURCE = ("*From the record's parts (docs/record/baselines), each keyed to the classifier weights, examples, "
                 "code and kernels it was computed with (docs/record.md).*")


def _read(path: Path, reader: Callable[[Path], object], missing: list[str]):
    if not path.is_file():
        missing.append(path.name)
        return None
    try:
        return reader(path)
    except (OSError, ValueError) as error:
        raise ResultsError(f"{path}: cannot be read ({error})") from error


@dataclass
class Reports:
    """The reports of one run, read from its reports folder (data/08_reporting)."""

    folder: Path
    metrics: pd.DataFrame
    classifier_metrics: pd.DataFrame | None
    ablation: pd.DataFrame | None
    ablation_page: str | None
    summary: str | None
    timings: pd.DataFrame | None
    costs: dict[str, pd.DataFrame]
    afn: str | None
    throughput: pd.DataFrame | None
    serving: pd.DataFrame | None
    transfer: str | None
    transfer_metrics: pd.DataFrame | None
    afn_headline: dict | None
    students: dict[str, dict[str, pd.DataFrame]]
    missing: list[str]
    selections: dict[str, pd.DataFrame] | None = None  # each fold's ExpNet+ selection table
    fewshot: str | None = None  # fewshot.md and its summary: only a `fewshot` run writes them
    fewshot_summary: pd.DataFrame | None = None
    training_grid: str | None = None  # expnet_plus_training_grid.md: only an `ablation` run writes it
    record: str | None = None  # the committed record's section (`record_section`): only a `record` run writes it
    record_summary: str | None = None  # README's table of it (`record_summary`)
    suggestion_rules: str | None = None  # docs/fewshot.md's block, from the record of benchmarks/suggestion_rules.py
    learning_curve: str | None = None  # docs/amortize.md's block, from the record of benchmarks/student_learning_curve.py
    first_paint: str | None = None  # docs/explorer.md's block, from the record of benchmarks/explorer_pages.py
    runs: dict[str, RecordedRun] | None = None  # the identity of each pipeline's run (`runs/<pipeline>.json`)

    def source(self, *names: str) -> str:
        """The line naming the run that wrote the reports `names` (paths under the reports folder); ResultsError when
        they come from different runs: a comparison across runs is a table of its own (`comparison_source`)."""
        pipelines = sorted({str(pipeline_of(name)) for name in names})
        if len(pipelines) != 1:
            raise ResultsError(f"one table would mix the reports of the {' and '.join(pipelines)} runs "
                               f"({', '.join(names)}): a comparison across runs is a table of its own")
        return f"*From the {self.run_label(pipelines[0])}.*"

    def run_label(self, pipeline: str) -> str:
        """How the documents name `pipeline`'s run in these reports (`RecordedRun.label`), or that it is unknown."""
        run = (self.runs or {}).get(pipeline)
        return run.label if run is not None else (
            f"`{pipeline}` run whose identity is unknown (no {IDENTITY_FOLDER}/{pipeline}.json in {self.folder})")

    @classmethod
    def read(cls, folder: str | Path) -> "Reports":
        folder = Path(folder)
        metrics_path = folder / "crosstask_metrics.csv"
        if not metrics_path.is_file():
            raise ResultsError(f"{metrics_path} does not exist: run `kedro run --pipeline crosstask` first "
                               "(or give the reports folder of a run with --reports)")
        missing: list[str] = []
        csv, text = pd.read_csv, Path.read_text
        costs, selections = {}, {}
        for task in TASKS:
            cost = _read(folder / "crosstask" / f"explain_cost_{task}.csv", csv, missing)
            if cost is not None:
                costs[task] = cost
            selection = _read(folder / "ablation" / f"expnet_plus_selection_{task}.csv", csv, missing)
            if selection is not None:
                selections[f"{FOLD_PREFIX}{task}"] = selection
        # optional: only an `amortize` run writes them
        students = {task: {name: pd.read_csv(folder / "amortize" / f"{task}_{name}.csv") for name in STUDENT_TABLES}
                    for task in TASKS
                    if all((folder / "amortize" / f"{task}_{name}.csv").is_file() for name in STUDENT_TABLES)}
        try:
            runs = read_identities(folder)
            if any(run.files is not None for run in runs.values()):  # the record: every listed file checked
                runs = recorded_runs(folder)
        except RecordError as error:
            raise ResultsError(str(error)) from error
        return cls(folder=folder, metrics=pd.read_csv(metrics_path), runs=runs,
                   classifier_metrics=_read(folder / "classifier_metrics.csv", csv, missing),
                   ablation=_read(folder / "expnet_plus_ablation.csv", csv, missing),
                   ablation_page=_read(folder / "expnet_plus_ablation.md", text, missing),
                   summary=_read(folder / "crosstask_summary.md", text, missing),
                   timings=_read(folder / "node_timings" / "crosstask.csv", csv, missing), costs=costs,
                   afn=_read(folder / "afn_report.md", text, missing),
                   throughput=_read(folder / "benchmarks" / "attribution_throughput.csv", csv, missing),
                   serving=_read(folder / "benchmarks" / "serving_load.csv", csv, missing),
                   # optional: only a `transfer` run writes it (the base-size section shows it when there)
                   transfer=_read(folder / "transfer.md", text, []),
                   transfer_metrics=_read(folder / "transfer_metrics.csv", csv, []),
                   afn_headline=_read(folder / "afn" / "headline.json", lambda p: json.loads(p.read_text()), []),
                   students=students, missing=missing, selections=selections,
                   fewshot=_read(folder / "fewshot.md", text, []),
                   fewshot_summary=_read(folder / "fewshot_summary.csv", csv, []),
                   training_grid=_read(folder / "expnet_plus_training_grid.md", text, []))


def _demote(markdown: str, levels: int = 2) -> str:
    """Headings of an included report one or more levels down, so they nest under this document's sections."""
    return re.sub(r"^(#+)", lambda m: m.group(1) + "#" * levels, markdown, flags=re.MULTILINE)


def base_size_section(reports: Reports, base: Reports) -> list[str]:
    """docs/results.md's base-size part: the base-size run's classifiers beside the default run's, its cross-task
    tables, its AFN report (layer 8 of 12) and the across-architecture rows of both runs."""
    lines = [f"## Base size: all-mpnet-base-v2 (`{base.folder}`)", "", comparison_source(reports, base), "", "The same protocol on the packaged 12-layer encoder (MPNet, 12 heads, hidden 768: the papers' scale; "
             "`kedro run --pipeline crosstask --env base_size`, its caps in `conf/base_size/`).", ""]
    if reports.classifier_metrics is not None and base.classifier_metrics is not None:
        lines += ["### Classifiers (`classifier_metrics.csv` of both runs)", "",
                  classifier_comparison_table(reports.classifier_metrics, base.classifier_metrics), ""]
    lines += ["### Cross-task headline at base size", "", headline_table(base.metrics), "",
              "### The paper's claim at base size", "", paper_comparison_table(base.metrics), "",
              "### By prediction at base size", "", by_prediction_table(base.metrics), ""]
    if base.ablation is not None and "main_recipe" in base.ablation:
        lines += ["### Shape-free variants at base size", "", shape_free_table(base.ablation), ""]
    if base.transfer_metrics is not None or reports.transfer_metrics is not None:
        lines += ["### Across architectures (`transfer_metrics.csv` of both runs)", "",
                  transfer_table(base.transfer_metrics, reports.transfer_metrics), ""]
    if reports.afn_headline is not None and base.afn_headline is not None:
        lines += ["### AFN at the paper's layer (`afn/headline.json` of both runs)", "",
                  afn_comparison_table(reports.afn_headline, base.afn_headline), ""]
    if reports.throughput is not None and base.throughput is not None:
        lines += ["### Cost of each method at base size (`benchmarks/attribution_throughput.csv` of both runs)", "",
                  throughput_comparison_table(reports.throughput, base.throughput), ""]
    for title, page in (("MiniLM-trained folds on the base-size classifiers (`transfer.md` of the base-size run)",
                         base.transfer),
                        ("Base-size-trained folds on the MiniLM classifiers (`transfer.md` of the default run)",
                         reports.transfer)):
        if page is not None:
            lines += [f"### {title}", "", _demote(page.strip(), 3), ""]
    if base.students:
        lines += ["### Amortized students at base size (`amortize/<task>_*.csv` of the base-size run)", "",
                  students_table(base.students), ""]
    if base.afn is not None:
        lines += ["### AFN at base size (`afn_report.md` of the base-size run)", "",
                  _demote(base.afn.strip(), 3).replace("](afn/", "](images/base_afn_"), ""]
    return lines


def results_document(reports: Reports, base: Reports | None = None) -> str:
    """docs/results.md: every table of the reports, each section naming the file it comes from and the run that
    wrote it (`Reports.source`); the same reports give the same text, whenever it is regenerated."""
    folder, source = reports.folder, reports.source
    runs = sorted((reports.runs or {}).values(), key=lambda run: run.pipeline)
    lines = ["# Results", "",
             f"Generated by `learned-attribution results` from the reports in `{folder}`"
             f"{' and the record of every baseline on every example' if reports.record is not None else ''}. "
             "Do not edit by hand: regenerate it. Intervals are bootstrap 95% over examples; AUROC is "
             "per example, F1 at the matched top-k budget (k = round(rho x n), rho the training tasks' rationale "
             "density); \"best baseline\" is among the methods run on every example.", "",
             *(["The runs these tables come from:", "", *(f"- the {run.label}" for run in runs), ""] if runs else []),
             "## Cross-task headline (`crosstask_metrics.csv`)", "", source("crosstask_metrics.csv"), "",
             RECIPE_CAVEAT, "",
             headline_table(reports.metrics), "",
             *(["## Shape-free variants beside the main job's recipe (`expnet_plus_ablation.csv`: `kedro run "
                "--pipeline ablation`)", "", source("expnet_plus_ablation.csv"), "",
                "A shape-free variant reads no per-layer or per-head column, so it explains a classifier of any supported "
                "family and shape; each fold keeps one (`crosstask.expnet_plus.shape_free`) for such classifiers. Scored "
                "here on the fold's own classifier: the cost of crossing architectures on the same architecture.", "",
                shape_free_table(reports.ablation), ""]
               if reports.ablation is not None and "main_recipe" in reports.ablation else []),
             *(["## Selection rules, their track record (`ablation/expnet_plus_selection_<task>.csv`, "
                "`expnet_plus_ablation.csv`: `kedro run --pipeline ablation`)", "",
                source("expnet_plus_ablation.csv", *(f"ablation/expnet_plus_selection_{task}.csv" for task in TASKS)), "",
                "How well each rule's score of the ExpNet+ candidates predicts their held-out AUROC, per fold: "
                "`mean_validation` (the mean over the training directions, the rule the ablation's `selected` "
                "applies), "
                "`worst_direction` (the lowest direction) and `fixed_default` (the mean held-out AUROC on the other "
                "folds; their explainers trained on this fold's task). Regret: the best candidate's held-out AUROC in "
                "hindsight minus the pick's.", "",
                track_record_section(reports.ablation, reports.selections), ""]
               if reports.ablation is not None and reports.selections else []),
             "## The paper's claim at this scale (`crosstask_metrics.csv`; the paper's numbers are bert-base)", "",
             source("crosstask_metrics.csv"), "", RECIPE_CAVEAT, "", paper_comparison_table(reports.metrics), "",
             "## By prediction (`crosstask_metrics.csv`, subsets `correct` / `incorrect`)", "",
             source("crosstask_metrics.csv"), "", RECIPE_CAVEAT, "", by_prediction_table(reports.metrics), "",
             "## Predicted and gold mode (`crosstask_metrics.csv`, column `mode`)", "", source("crosstask_metrics.csv"),
             "", RECIPE_CAVEAT, "",
             "Predicted mode explains each example's predicted class (every table above); gold mode explains the "
             "class its human rationale supports, so on a mispredicted example it asks what the rationale marks. "
             "The two are one explanation on a correct example (the paper's protocol keeps only those). The best "
             "baseline is chosen in each mode among the methods run on every example: integrated gradients, "
             "occlusion, LIME and KernelSHAP run on a sample only.", "",
             modes_table(reports.metrics), "",
             *(["## Every baseline on every example (`docs/record/baselines`: `kedro run --pipeline record`)", "",
                RECORD_SOURCE, "", RECIPE_CAVEAT, "",
                "The four methods the main job runs on a seeded sample only, run on every scored example of every "
                "fold in both modes and committed as per-example metric rows (docs/record.md); ExpNet+ from the main "
                "job's own rows (`main_job` parts). ExpNet+ minus it: paired AUROC difference on the same examples. "
                "Coverage below 100% is a record still being computed.", "",
                reports.record, ""] if reports.record is not None else []),
             *(["## What ExpNet+ trains on (`expnet_plus_training_grid.md`: `kedro run --pipeline ablation`)", "",
                source("expnet_plus_training_grid.md"), "",
                _demote(reports.training_grid.strip().split("\n", 1)[1].strip(), 1), ""]
               if reports.training_grid is not None else [])]
    if reports.fewshot is not None:
        lines += ["## Few-shot in-task (`fewshot.md`, `fewshot_summary.csv`: `kedro run --pipeline fewshot`)", "",
                  source("fewshot.md", "fewshot_summary.csv"), "",
                  *(["Chart: [few-shot curves](images/fewshot.png)", ""] if (folder / "fewshot.png").is_file() else []),
                  _demote(reports.fewshot.strip().split("\n", 1)[1].strip(), 1), ""]
    if reports.students:
        tables = [f"amortize/{task}_{name}.csv" for task in reports.students for name in STUDENT_TABLES]
        lines += ["## Amortized students (`amortize/<task>_*.csv`: `kedro run --pipeline amortize`)", "",
                  source(*tables), "",
                  "Per task classifier, a one-pass student trained on its teacher's attributions of the task's "
                  "unlabeled training texts (docs/amortize.md): fidelity, faithfulness and throughput on further "
                  "held-out texts, AUROC on the rationale test set at the fold's matched budget.", "",
                  *([amortize_wall_time(reports.runs["amortize"]), ""] if "amortize" in (reports.runs or {}) else []),
                  students_table(reports.students), "",
                  "Every student variant (`amortize/<task>_variants.csv`), the selected one by its validation "
                  "Spearman with the teacher's labels:", "", student_variants_table(reports.students), ""]
        charts = " ".join(f"[{kind} {task}](images/amortize_{kind}_{task}.png)" for task in reports.students
                          for kind in ("cost_plausibility", "cost_faithfulness")
                          if (folder / "amortize" / f"{kind}_{task}.png").is_file())
        lines += [f"Charts (every method of the fold and the student): {charts}", ""] if charts else []
    if reports.classifier_metrics is not None:
        lines += ["## Classifiers (`classifier_metrics.csv`)", "", source("classifier_metrics.csv"), "",
                  classifier_table(reports.classifier_metrics), ""]
    if reports.costs:
        charts = " ".join(f"[{task}](images/cost_{task}.png)" for task in reports.costs
                          if (folder / "crosstask" / f"cost_{task}.png").is_file())
        lines += ["## Cost against plausibility (`crosstask/explain_cost_<task>.csv`: one timed pass in the fold)", "",
                  source("crosstask_metrics.csv", *(f"crosstask/explain_cost_{task}.csv" for task in reports.costs)),
                  "", pareto_table(reports.metrics, reports.costs), "",
                  *([f"Charts: {charts}", ""] if charts else [])]
    if reports.timings is not None:
        lines += ["## Where the time went (`node_timings/crosstask.csv`, the main job's last `kedro run`)", "",
                  source("node_timings/crosstask.csv"), "", stage_table(reports.timings), ""]
    if reports.throughput is not None:
        lines += ["## Cost of each method (`benchmarks/attribution_throughput.csv`)", "",
                  throughput_table(reports.throughput), ""]
    if reports.serving is not None:
        lines += ["## Served model under load (`benchmarks/serving_load.csv`)", "", serving_table(reports.serving), ""]
    for title, page, name in (("Per-fold summary (`crosstask_summary.md`)", reports.summary, "crosstask_summary.md"),
                              ("ExpNet+ ablation (`expnet_plus_ablation.md`)", reports.ablation_page,
                               "expnet_plus_ablation.md"),
                              ("AFN (`afn_report.md`)", reports.afn, "afn_report.md")):
        if page is not None:
            # The AFN report links its plots beside it (afn/<plot>.png); write_results copies them to images/.
            lines += [f"## {title}", "", source(name), "", _demote(page.strip()).replace("](afn/", "](images/afn_"), ""]
    if base is not None:
        lines += base_size_section(reports, base)
    if reports.missing:
        lines += [f"Not in these reports (their sections left out): {', '.join(sorted(reports.missing))}.", ""]
    return "\n".join(lines)


def comparison_source(reports: Reports, base: Reports) -> str:
    """The line naming both runs of a table that compares them."""
    return f"*A comparison across two runs: the {reports.run_label('crosstask')} (`{reports.folder}`) and the " \
           f"{base.run_label('crosstask')} (`{base.folder}`).*"


# The files whose marked blocks `learned-attribution results` fills by default (and CI regenerates).
READMES = ("README.md", "docs/fewshot.md", "docs/amortize.md", "docs/explorer.md")


def amortize_wall_time(run: RecordedRun) -> str:
    """The amortize run's wall time beside its target (the three task classifiers' students within 90 minutes on a
    2-core CPU at the default sizes); the run's source line, above it, names its `--params` and kernels."""
    minutes = "an unknown time" if run.minutes is None else f"{run.minutes:.0f} minutes"
    return (f"The run took {minutes} from start to end (its `--params` and kernels: the line above); the target at "
            "the default sizes is the three task classifiers' students within 90 minutes on a 2-core CPU.")


def marked_blocks(reports: Reports, base: Reports | None = None) -> dict[str, str]:
    """The tables a README may embed, by marker name."""
    blocks = {"headline": f"{reports.source('crosstask_metrics.csv')} {RECIPE_CAVEAT}\n\n"
                          f"{headline_table(reports.metrics)}"}
    if reports.students:
        tables = [f"amortize/{task}_{name}.csv" for task in reports.students for name in STUDENT_TABLES]
        timed = [amortize_wall_time(reports.runs["amortize"])] if "amortize" in (reports.runs or {}) else []
        blocks["students"] = "\n\n".join([reports.source(*tables), *timed, students_table(reports.students)])
    if reports.fewshot_summary is not None:
        blocks["fewshot"] = f"{reports.source('fewshot_summary.csv')}\n\n{fewshot_headline(reports.fewshot_summary)}"
    if base is not None:
        parts = [comparison_source(reports, base), ""]
        if reports.classifier_metrics is not None and base.classifier_metrics is not None:
            parts += [classifier_comparison_table(reports.classifier_metrics, base.classifier_metrics), ""]
        parts += [headline_table(base.metrics)]
        if base.transfer_metrics is not None or reports.transfer_metrics is not None:
            parts += ["", transfer_table(base.transfer_metrics, reports.transfer_metrics)]
        if reports.afn_headline is not None and base.afn_headline is not None:
            parts += ["", afn_comparison_table(reports.afn_headline, base.afn_headline)]
        blocks["base_size"] = "\n".join(parts)
    if reports.throughput is not None:
        blocks["attribution_throughput"] = throughput_table(reports.throughput)
    if reports.serving is not None:
        blocks["serving_load"] = serving_table(reports.serving)
    if reports.suggestion_rules is not None:
        blocks["suggestion_rules"] = reports.suggestion_rules
    if reports.learning_curve:
        blocks["student_learning_curve"] = reports.learning_curve
    if reports.first_paint:
        blocks["explorer_first_paint"] = reports.first_paint
    if reports.record_summary is not None:
        blocks["record"] = f"{RECORD_SOURCE} {RECIPE_CAVEAT}\n\n{reports.record_summary}"
    return blocks


def benchmark_source(record: Path, name: str) -> str:
    """The source line of a benchmark's tables in the record: its run, from `<name>.json`, which the benchmark writes
    when it finishes (the tables it lists checked against their SHA-256)."""
    run = recorded_benchmark(record, name)
    return (f"*From the {run.label}.*" if run is not None else
            f"*From `benchmarks/{name}.py`'s tables in docs/record, written before the benchmark recorded its run's "
            "identity (commit, kernels, dates): rerun it to record them.*")


def write_results(reports_folder: str | Path, output: str | Path | None, readmes: list[str | Path],
                  base_reports: str | Path | None = None, record: str | Path | None = None) -> list[Path]:
    """Write the results document to `output` (with the folds' cost charts and the AFN plots in `images/` beside
    it) and fill the marked blocks of each README; with `base_reports` (a base-size run's reports folder, used when
    it holds a finished run) the base-size section too. A section without its report is left out and the document
    says which; a README block without its table is an error. Returns what was written."""
    reports = Reports.read(reports_folder)
    if record is not None and (Path(record) / "baselines").is_dir():
        rows, parts = read_record(Path(record) / "baselines")
        table = record_table(rows, parts)
        reports.record, reports.record_summary = record_section(table, parts), record_summary(table, parts)
    if record is not None and (Path(record) / "suggestion_rules_choice.csv").is_file():
        reports.suggestion_rules = benchmark_source(Path(record), "suggestion_rules") + "\n\n" + suggestion_rules_block(
            pd.read_csv(Path(record) / "suggestion_rules.csv"), pd.read_csv(Path(record) / "suggestion_rules_choice.csv"))
    if record is not None and (Path(record) / "student_learning_curve.csv").is_file():
        reports.learning_curve = (benchmark_source(Path(record), "student_learning_curve") + "\n\n"
                                  + learning_curve_table(pd.read_csv(Path(record) / "student_learning_curve.csv")))
    if record is not None and (Path(record) / "explorer_first_paint.csv").is_file():
        reports.first_paint = (benchmark_source(Path(record), "explorer_first_paint") + "\n\n"
                               + first_paint_block(pd.read_csv(Path(record) / "explorer_first_paint.csv")))
    base = None
    if base_reports is not None and (Path(base_reports) / "crosstask_metrics.csv").is_file():
        base = Reports.read(base_reports)
    written = []
    if output is not None:
        output = Path(output)
        charts = [(reports.folder / "crosstask" / f"cost_{task}.png", f"cost_{task}.png") for task in TASKS]
        charts += [(path, f"afn_{path.name}") for path in sorted((reports.folder / "afn").glob("*.png"))]
        charts += [(path, f"amortize_{path.name}") for path in sorted((reports.folder / "amortize").glob("cost_*.png"))]
        charts += [(reports.folder / "fewshot.png", "fewshot.png")]
        if base is not None:
            charts += [(path, f"base_afn_{path.name}") for path in sorted((base.folder / "afn").glob("*.png"))]
        for chart, name in charts:
            if chart.is_file():
                (output.parent / "images").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(chart, output.parent / "images" / name)
                written.append(output.parent / "images" / name)
        write_text_atomically(output, results_document(reports, base))
        written.append(output)
    blocks = marked_blocks(reports, base)
    for readme in readmes:
        path = Path(readme)
        write_text_atomically(path, fill_marked_blocks(path.read_text(), blocks, str(path)))
        written.append(path)
    return written
