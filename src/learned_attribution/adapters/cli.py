"""`learned-attribution explain`: explain new text with a trained fold or student (see docs/explain.md);
`learned-attribution fit`: train a student of an expensive method for any classifier (docs/amortize.md), or
refit a fold's ExpNet+ on your rationales; `learned-attribution suggest`: which texts to annotate (docs/fewshot.md);
`learned-attribution explore`: browse, explain and annotate in a browser (docs/explorer.md).

    learned-attribution explain --fold heldout_sst2 "A gutsy and exhilarating movie ." --output out.jsonl --html out.html
    learned-attribution explain --fold heldout_cola --input sentences.txt --method expnet_plus --method saliency
    learned-attribution fit --classifier my_model/ --input texts.txt --teacher kernel_shap --output my_student/
    learned-attribution explain --explainer my_student/ "A gutsy and exhilarating movie ."
    learned-attribution suggest --fold heldout_sst2 --input texts.txt --k 32 --output to_annotate.json
    learned-attribution explore --data data --port 8765
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

from learned_attribution.core.atomic import probe_writable, write_text_atomically
from learned_attribution.core.data.rationales import FORMATS, annotation_formats
from learned_attribution.core.data.texts import read_inputs, require_text
from learned_attribution.core.errors import InputError
from learned_attribution.core.models.artifacts import IncompatibleClassifierError
from learned_attribution.core.tasks import FOLDS
from learned_attribution.core.explainers.teacher import TEACHER_BUDGETS
from learned_attribution.core.explainers.learned import EXPNET_PLUS
from learned_attribution.services.bundle import CARD, DEFAULT_MODELS_DIR, STUDENT
from learned_attribution.services.checkout import git_commit
from learned_attribution.services.config.amortize import SIZES
from learned_attribution.services.explain import FoldExplainer, StudentExplainer
from learned_attribution.services.explanation import WORD_SPLITS


TEACHER_UNFINISHED = 75  # fit's exit status when --teacher-minutes ran out (EX_TEMPFAIL: run it again to continue)


def check_output(option: str, value: str | None) -> None:
    """Refuse an output path that cannot be written, before any work: a folder, a missing folder, or a folder
    where no file can be written (read-only or full filesystem, permissions)."""
    if not value:
        return
    path = Path(value)
    if path.is_dir():
        raise InputError(f"{option} {path}: is a folder, not a file")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"{option} {path}: the folder {folder} does not exist")
    try:
        probe_writable(folder)
    except OSError as error:
        raise InputError(f"{option} {path}: cannot write in {folder} ({error.strerror or error})") from error


def _write(option: str, value: str, text: str) -> None:
    try:
        write_text_atomically(Path(value), text)
    except OSError as error:  # e.g. the disk filled up while explaining: one line, no half-written file left
        raise InputError(f"{option} {value}: cannot write ({error.strerror or error})") from error


def explain_command(args: argparse.Namespace) -> int:
    if bool(args.fold) == bool(args.explainer):
        raise InputError("give one of --fold (a trained fold) and --explainer (a student folder)")
    if bool(args.texts) == bool(args.input):
        raise InputError("give either TEXT arguments or --input FILE (not both, not neither)")
    check_output("--output", args.output)
    check_output("--html", args.html)
    if args.output and args.html and Path(args.output).resolve() == Path(args.html).resolve():
        raise InputError(f"--output and --html name the same file {args.output}")
    if args.input:
        texts, ids = read_inputs(args.input, args.text_column)
    else:
        texts = [require_text(text, f"TEXT argument {index + 1}") for index, text in enumerate(args.texts)]
        ids = [str(index + 1) for index in range(len(texts))]
    if args.explainer:
        explainer = StudentExplainer.from_folder(args.explainer, classifier=args.classifier, device=args.device,
                                                 max_length=args.max_length)
        if STUDENT in explainer.incompatible and not args.method:  # asked for the student, which cannot explain it
            raise IncompatibleClassifierError(f"{explainer.incompatible[STUDENT]} (the baselines run on it with "
                                              "--method NAME)")
    else:
        explainer = FoldExplainer.from_fold(args.fold, classifier=args.classifier, models_dir=args.models_dir,
                                            device=args.device, max_length=args.max_length)
    methods = args.method or explainer.default_methods
    with tqdm(total=len(texts), desc=f"explain ({', '.join(methods)})", unit="text", file=sys.stderr,
              disable=not args.input) as progress:
        explanations = explainer.explain(texts, methods=methods, batch_size=args.batch_size, ids=ids,
                                         progress=progress, words=args.words, target=args.target,
                                         contrast=args.contrast)
    lines = "".join(json.dumps(e.record(), ensure_ascii=False) + "\n" for e in explanations)
    if args.output:
        _write("--output", args.output, lines)
    else:
        sys.stdout.write(lines)
    if args.html:
        from learned_attribution.services.reporting.pages import explanation_page  # matplotlib: only for --html

        explained = args.classifier or explainer.card.get("held_out_task") or explainer.card.get("classifier")
        title = f"{explainer.folder.name}: explanations of the {explained} classifier"
        _write("--html", args.html, explanation_page(title, explanations, methods))
    written = [str(p) for p in (args.output, args.html) if p]
    if written:
        print(f"explained {len(explanations)} texts with {', '.join(methods)}: wrote {', '.join(written)}",
              file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="learned-attribution",
                                     description="Learned token attribution: explain a classifier's predictions.")
    commands = parser.add_subparsers(dest="command", required=True)
    explain = commands.add_parser("explain", help="explain new text with a trained fold",
                                  description="Per-word scores of each method for the class the classifier predicts, "
                                              "or for the class asked for (--target), or for its margin over "
                                              "another (--contrast).")
    explain.add_argument("texts", nargs="*", metavar="TEXT", help="texts to explain (or use --input)")
    explain.add_argument("--fold", help=f"trained fold ({', '.join(FOLDS)}) or a fold folder")
    explain.add_argument("--explainer", help="a student folder (`learned-attribution fit --output`; instead of --fold)")
    explain.add_argument("--classifier", help="task name (sst2, ...), a save_pretrained folder or a hub name "
                                              "(default: the fold's held-out task's classifier; a student's own)")
    explain.add_argument("--method", action="append", help="method to apply (repeatable; default: expnet_plus and "
                                                           "the fold's best baseline)")
    explain.add_argument("--input", help="a .txt (one text a line), .jsonl (text or words, optional id) or .csv file")
    explain.add_argument("--text-column", default="text", help="text column of a .csv input (default: text)")
    explain.add_argument("--words", choices=WORD_SPLITS, default="tokenizer",
                         help="how a text is split into words: the classifier tokenizer's pre-tokenizer (punctuation "
                              "apart, for BERT) or at whitespace only (default: tokenizer)")
    explain.add_argument("--target", help="the class to explain, by the classifier's name or index, for every text "
                                          "(default: each text's predicted class)")
    explain.add_argument("--contrast", help="with --target: a foil class; the scores explain the target's margin "
                                            "over it (logits for gradient methods, probabilities for perturbation "
                                            "methods)")
    explain.add_argument("--output", help="JSONL output file (default: standard output)")
    explain.add_argument("--html", help="also write an HTML page (works offline)")
    explain.add_argument("--models-dir", default=str(DEFAULT_MODELS_DIR), help="where trained folds and classifiers "
                                                                             "are (default: data/06_models)")
    explain.add_argument("--batch-size", type=int, default=16)
    explain.add_argument("--max-length", type=int, help="subword tokens per text (default: the fold's, 128; at most "
                                                        "the classifier's positions)")
    explain.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    explain.set_defaults(run=explain_command)
    fit = commands.add_parser("fit", help="train a student of an expensive attribution method for a classifier, "
                                          "or refit a fold's ExpNet+ on your own rationales (--rationales)",
                              description="Amortization (docs/amortize.md): the teacher explains your unlabeled texts, "
                                          "a one-pass student learns to reproduce it; no rationales needed. With "
                                          "--rationales and --fold (docs/fewshot.md): the prior and schedule the "
                                          "fewshot pipeline chose and measured for the fold at the nearest k below "
                                          "your number of annotated examples, refit on them.")
    fit.add_argument("--classifier", help="a save_pretrained classifier folder (or a task name); with --rationales "
                                          "default: the fold's held-out task's")
    fit.add_argument("--input", help="unlabeled texts: .txt (one a line), .jsonl or .csv (a student)")
    fit.add_argument("--rationales", help="annotated examples in evaluate_external's formats (docs/"
                                          "external_rationales.md: " + "; ".join(f.summary for f in FORMATS.values())
                                          + "): refit --fold's ExpNet+ on them")
    fit.add_argument("--rationale-labels", nargs="+", metavar="NAME",
                     help=f"with a {' or '.join(f.title for f in FORMATS.values() if f.tagged)} export: the span "
                          "labels that mark rationales (needed when the export has several labels)")
    fit.add_argument("--class-field", metavar="NAME",
                     help="with a span file: the field holding the class, a name or an index of the classifier's classes "
                          "(default: " + ", ".join(
                         f"{f.class_field} in {f.title}" for f in FORMATS.values() if f.class_field) + ")")
    fit.add_argument("--fold", help=f"with --rationales: the trained fold ({', '.join(FOLDS)}) or a fold folder")
    fit.add_argument("--models-dir", default=str(DEFAULT_MODELS_DIR), help="with --rationales: where trained folds "
                                                                         "are (default: data/06_models)")
    fit.add_argument("--no-test-check", action="store_true",
                     help="with --rationales: fit without checking your examples against the run's test examples "
                          "of the fold's held-out task (07_model_output/rationale_predictions_<task>.parquet beside "
                          "--models-dir); without this flag a missing file is refused")
    fit.add_argument("--text-column", default="text", help="text column of a .csv input (default: text)")
    fit.add_argument("--teacher", default="kernel_shap", choices=sorted(TEACHER_BUDGETS),
                     help="the method the student learns (default: kernel_shap)")
    fit.add_argument("--n-samples", type=int, help="the teacher's budget: samples (kernel_shap, lime) or steps "
                                                   "(integrated_gradients); default 200 and 20")
    fit.add_argument("--sizes", default="quick", choices=sorted(SIZES),
                     help="the named max texts, held-out texts and reference factor: quick (default: "
                          + ", ".join(f"{k} {v}" for k, v in SIZES["quick"].items())
                          + ") or full (" + ", ".join(f"{k} {v}" for k, v in SIZES["full"].items())
                          + "); the three flags below win over it")
    fit.add_argument("--max-texts", type=int, help="training texts the teacher explains (default: the size's)")
    fit.add_argument("--held-out", type=int, help="further texts for the report (default: the size's; at most a "
                                                  "fifth of the texts)")
    fit.add_argument("--reference-factor", type=int,
                     help="the reference teacher's budget as a multiple of the teacher's (default: the size's; 0: "
                          "no fidelity table)")
    fit.add_argument("--dask", help="run the teacher on Dask: local (a LocalCluster here) or tcp://HOST:8786")
    fit.add_argument("--dask-workers", type=int, default=2, help="LocalCluster workers with --dask local (default 2)")
    fit.add_argument("--output", required=True, help="the student's folder (written when complete)")
    fit.add_argument("--cache", help="the teacher's resumable parts (default: OUTPUT.teacher beside the output)")
    fit.add_argument("--teacher-minutes", type=float,
                     help="start no teacher part after this many minutes of this invocation: the parts computed are "
                          f"kept and fit exits with status {TEACHER_UNFINISHED}; run the same command again to "
                          "continue (a long teacher in several invocations; default: no limit)")
    fit.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--tracking-uri", help="also log an MLflow run and register the student (e.g. "
                                            "sqlite:///mlflow.db); default: no MLflow")
    fit.add_argument("--experiment", default="amortize", help="the MLflow experiment (default: amortize)")
    fit.set_defaults(run=fit_command)
    suggest = commands.add_parser("suggest", help="pick which of your texts to annotate for a fold's few-shot refit "
                                                  "(fit --rationales)",
                                  description="Picks k texts to annotate (docs/fewshot.md, \"Which examples to "
                                              "annotate\") by the rule kept on validation pools (seeded: --seed); "
                                              "writes "
                                              "them as a file to import into an annotation tool, each with the "
                                              "predicted class.")
    suggest.add_argument("--fold", required=True, help=f"the trained fold ({', '.join(FOLDS)}) or a fold folder whose "
                                                       "ExpNet+ will be refit")
    suggest.add_argument("--input", required=True, help="your texts: .txt (one a line), .jsonl (text or words, "
                                                        "optional id) or .csv")
    suggest.add_argument("--k", type=int, required=True, help="how many texts to annotate")
    suggest.add_argument("--output", required=True, help="the file to annotate: " + ", ".join(
        f"{FORMATS[name].suffix} ({name})" for name in annotation_formats()))
    suggest.add_argument("--format", default="label-studio", help="the file's format, an import for the annotation "
                                                                  f"tool: {', '.join(annotation_formats())} "
                                                                  "(docs/fewshot.md); default: label-studio")
    suggest.add_argument("--classifier", help="task name, a save_pretrained folder or a hub name (default: the "
                                              "fold's held-out task's, as fit --rationales)")
    suggest.add_argument("--text-column", default="text", help="text column of a .csv input (default: text)")
    suggest.add_argument("--models-dir", default=str(DEFAULT_MODELS_DIR), help="where trained folds and classifiers "
                                                                             "are (default: data/06_models)")
    suggest.add_argument("--batch-size", type=int, default=16)
    suggest.add_argument("--seed", type=int, default=0, help="seeds the rule's k-means (default: 0)")
    suggest.add_argument("--max-length", type=int, help="subword tokens per text (default: the fold's, 128)")
    suggest.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    suggest.set_defaults(run=suggest_command)
    results = commands.add_parser("results", help="write docs/results.md and README's tables from the record",
                                  description="Every number from the committed record of the runs' reports "
                                              "(results.py); `record add` puts a run's reports there.")
    results.add_argument("--reports", default="docs/record/reports",
                         help="the reports folder: the record's (default: docs/record/reports) or a run's own "
                              "(data/08_reporting)")
    results.add_argument("--base-reports", default="docs/record/base_size/reports",
                         help="a base-size run's reports, its section written when they hold a finished run "
                              "(default: docs/record/base_size/reports)")
    results.add_argument("--record", default="docs/record",
                         help="the committed record (every baseline on every example, the suggestion rules), each "
                              "section or block written when there (default: docs/record; 'none': left out)")
    results.add_argument("--output", default="docs/results.md", help="the results document (default: docs/results.md)")
    results.add_argument("--readme", action="append", help="a file whose <!-- results:NAME --> blocks are rewritten "
                                                           "(repeatable; default: README.md, "
                                                           "docs/fewshot.md, docs/amortize.md and "
                                                           "docs/explorer.md; "
                                                           "'none': no file)")
    results.set_defaults(run=results_command)
    record = commands.add_parser("record", help="the committed record of the runs' reports (docs/record.md)")
    record_commands = record.add_subparsers(dest="record_command", required=True)
    add = record_commands.add_parser("add", help="copy a finished pipeline run's reports into the record, with the "
                                                 "run's identity (commit, kernels, dates) and every file's checksum",
                                     description="Replaces that pipeline's previous run in the record.")
    add.add_argument("--pipeline", required=True, help="the pipeline whose run to record: crosstask, fewshot, ...")
    add.add_argument("--reports", default="data/08_reporting", help="the run's reports folder "
                                                                     "(default: data/08_reporting)")
    add.add_argument("--record", default="docs/record/reports", help="the record's reports folder "
                                                                     "(default: docs/record/reports)")
    add.set_defaults(run=record_add_command)
    explore = commands.add_parser("explore", help="browse, explain and annotate in a browser (docs/explorer.md)",
                                  description="A local web app on a data folder: each fold's held-out examples with "
                                              "the human rationale and every method's map, typed text explained, "
                                              "annotate suggested texts and refit ExpNet+.")
    explore.add_argument("--data", default="data", help="the data folder of a run (default: data)")
    explore.add_argument("--host", default="127.0.0.1", help="the interface to listen on (default: 127.0.0.1, "
                                                             "this machine only)")
    explore.add_argument("--port", type=int, default=8765, help="default: 8765")
    explore.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    explore.set_defaults(run=explore_command)
    return parser


def explore_command(args: argparse.Namespace) -> int:
    from learned_attribution.adapters.explorer.server import serve  # the web stack: only for this command

    serve(args.data, host=args.host, port=args.port, device=args.device)
    return 0


def fit_command(args: argparse.Namespace) -> int:
    # Imported here: the explain command, the common one, starts without the training and MLflow stack.
    from learned_attribution.services.amortize.teacher import TeacherUnfinished
    from learned_attribution.services.amortize.fit import fit

    output = Path(args.output)
    if output.exists() and not (output / CARD).is_file():
        raise InputError(f"--output {output}: exists and is not a folder fit wrote; choose a new folder")
    check_output("--output", str(output / CARD) if output.is_dir() else str(output))
    if args.rationales or args.fold:
        return fit_rationales_command(args, output)
    if not args.classifier or not args.input:
        raise InputError("fit needs --classifier and --input (a student), or --rationales and --fold (a refit)")
    if args.rationale_labels or args.class_field:
        raise InputError("--rationale-labels and --class-field describe a --rationales file: a student has none")
    if args.no_test_check:
        raise InputError("--no-test-check goes with --rationales: a student is fitted on unlabeled texts")
    texts, ids = read_inputs(args.input, args.text_column)
    try:
        student = fit(args.classifier, texts, output, teacher=args.teacher, n_samples=args.n_samples, ids=ids,
                      device=args.device, dask=args.dask, dask_workers=args.dask_workers, cache=args.cache,
                      title=f"Student of {args.teacher} for {args.classifier}", sizes=args.sizes,
                      seed=args.seed, teacher_minutes=args.teacher_minutes,
                      **{key: value for key, value in (("max_texts", args.max_texts),
                                                       ("held_out_texts", args.held_out),
                                                       ("reference_factor", args.reference_factor))
                         if value is not None})
    except InputError as error:
        raise InputError(str(error).replace("n_samples:", "--n-samples:", 1)) from None
    except TeacherUnfinished as stopped:  # not a failure: the parts are kept for the next invocation
        print(f"stopped after --teacher-minutes {args.teacher_minutes:g}: {stopped}", file=sys.stderr)
        return TEACHER_UNFINISHED
    print(f"wrote {output} (student, report.md); explain with: learned-attribution explain --explainer {output} "
          "TEXT", file=sys.stderr)
    if args.tracking_uri:
        logged = log_student(args, output, student.bundle)
        print(f"logged MLflow run {logged} ({args.tracking_uri}, experiment {args.experiment})", file=sys.stderr)
    return 0


def fit_rationales_command(args: argparse.Namespace, output: Path) -> int:
    from learned_attribution.services.fewshot.refit import fit_rationales

    if not args.rationales or not args.fold:
        raise InputError("fit --rationales needs --fold (the fold whose ExpNet+ is refit), and --fold needs "
                         "--rationales")
    if args.input:
        raise InputError("--input is a student's unlabeled texts: with --rationales, leave it out")
    # The fold's own held-out test examples, where this project's run wrote them, are never fitted on (fit_rationales
    # finds them; without them it refuses unless --no-test-check).
    explainer = fit_rationales(args.fold, args.rationales, output, classifier=args.classifier,
                               models_dir=args.models_dir, test_check=not args.no_test_check, device=args.device,
                               rationale_labels=args.rationale_labels, class_field=args.class_field)
    fewshot = explainer.card["fewshot"]
    used = (f"the fold's few-shot choice at k = {fewshot['k']}: prior {fewshot['variant']}" if fewshot["k"] is not None
            else "no few-shot choice stored for the fold: its own ExpNet+ with the default schedule")
    print(f"wrote {output} (the fold's folder, ExpNet+ refit on {fewshot['n_examples']} annotated examples with "
          f"{used}{'' if fewshot['test_check'] else '; test examples not checked'}); explain with: "
          f"learned-attribution explain --fold {output} TEXT", file=sys.stderr)
    return 0


def suggest_command(args: argparse.Namespace) -> int:
    from learned_attribution.core.models import artifacts
    from learned_attribution.core.data.rationales import annotation_file, check_format
    from learned_attribution.services.fewshot.suggest import suggest

    check_format(args.format, args.output)
    check_output("--output", args.output)
    if args.k < 1:
        raise InputError(f"--k {args.k}: must be at least 1")
    texts, ids = read_inputs(args.input, args.text_column)
    if len(texts) < args.k:  # before the fold and its classifier are loaded
        raise InputError(f"{args.input}: {len(texts)} text{'s' * (len(texts) != 1)}, fewer than --k {args.k} to "
                         f"pick from; ask for at most {len(texts)}")
    explainer = FoldExplainer.from_fold(args.fold, classifier=args.classifier, models_dir=args.models_dir,
                                        device=args.device, max_length=args.max_length)
    if EXPNET_PLUS in explainer.incompatible:  # the refit these texts are for could not read this classifier
        raise artifacts.IncompatibleClassifierError(explainer.incompatible[EXPNET_PLUS])
    picked = suggest(explainer.classifier, texts, ids, args.k, max_length=explainer.max_length,
                     batch_size=args.batch_size, seed=args.seed, source=args.input)
    _write("--output", args.output, annotation_file(picked, args.format))
    print(f"wrote {args.output} ({args.format}: {args.k} of {len(texts)} texts, each with its predicted class); "
          f"mark the words that support it, export, then: learned-attribution fit --rationales EXPORT --fold "
          f"{args.fold} --output my_fold/", file=sys.stderr)
    return 0


def log_student(args: argparse.Namespace, output: Path, bundle) -> str:
    """The student's MLflow run, as the amortize pipeline logs one (`adapters/hooks/runs.STUDENT`), its bundle
    registered as `<experiment>-<folder name>`; returns the run's registered model."""
    from learned_attribution.adapters.hooks.runs import STUDENT, Logged  # MLflow: only with --tracking-uri
    from learned_attribution.adapters.serving import register_bundle
    from learned_attribution.services.tracking import store
    from learned_attribution.services.tracking.run import TrackedRun, experiment, tracking_client

    client, uri = tracking_client(args.tracking_uri)
    guard = store.GuardedLogging(strict=True)
    params = {"classifier": str(args.classifier), "input": str(args.input), "teacher": json.dumps(bundle.card["teacher"], sort_keys=True)}
    key = store.resume_key(f"fit:{output.resolve()}", "cli", git_commit(Path.cwd()), {}, {})
    run = TrackedRun.open(client, experiment(client, args.experiment), name=output.name, key=key, resume=False,
                          tags={}, params=params, raw_inputs=store.raw_file_inputs({"input": args.input}),
                          commit=git_commit(Path.cwd()), guard=guard)
    logged = Logged(output.name, {}, None, args.experiment)
    try:
        tables = {"student_variants": bundle.tables["variants"],
                  **{key: bundle.tables[key] for key in ("table", "fidelity", "faithfulness", "cost")}}
        for name, table in tables.items():
            STUDENT.outputs[name](run, table, logged)
        STUDENT.outputs["report"](run, bundle.report, logged)
        version = register_bundle(run, output, bundle.card["classifier"], f"{args.experiment}-{output.name}")
    except Exception:
        run.close("FAILED")
        raise
    run.close("FINISHED")
    return f"models:/{args.experiment}-{output.name}/{version} (run {run.run_id}, {uri})"


def results_command(args: argparse.Namespace) -> int:
    from learned_attribution.services.reporting.results import READMES, write_results  # matplotlib, the reports

    readmes = args.readme or list(READMES)
    readmes = [] if readmes == ["none"] else [r for r in readmes if r != "none"]
    written = write_results(args.reports, args.output, readmes, base_reports=args.base_reports, record=None if args.record == "none" else args.record)
    print(f"wrote {', '.join(map(str, written))}", file=sys.stderr)
    return 0


def record_add_command(args: argparse.Namespace) -> int:
    from learned_attribution.services.record.runs import add_run

    run = add_run(args.reports, args.record, args.pipeline)
    print(f"recorded the {run.label}: {len(run.files or {})} files in {args.record}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (InputError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
