"""`fit`: an amortized student for your own classifier and unlabeled texts, written as a student's folder and
returned as a `StudentExplainer` (the Python API's, exported by the package root; `learned-attribution fit`)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from learned_attribution.core.errors import InputError
from learned_attribution.core.explainers.teacher import Teacher
from learned_attribution.core.models.architectures import architecture
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.models.runner import resolve_device

from .. import bundle as bundles
from ..config import AmortizeSettings, dask_settings, sized
from ..explain import StudentExplainer
from . import amortize, student_bundle


def fit(classifier: str | Path | TrainedClassifier, texts: Sequence[str | Sequence[str]], output: str | Path, *,
        teacher: str = "kernel_shap", teacher_settings: dict | None = None, n_samples: int | None = None,
        ids: Sequence[str] | None = None, device: str = "auto", dask: str | None = None, dask_workers: int = 2,
        cache: str | Path | None = None, title: str | None = None, sizes: str = "quick", **settings
        ) -> StudentExplainer:
    """Train an amortized student of `teacher` for `classifier` (a folder saved with `save_pretrained`, a task name
    or a loaded `TrainedClassifier`) on unlabeled `texts`, write its folder to `output` (with its report and tables)
    and return it as a `StudentExplainer`.

    - `teacher_settings` replace the teacher's defaults; `n_samples` sets its budget alone (samples for kernel_shap
      and lime, steps for integrated_gradients).
    - `sizes`: `quick` (the default) or `full`, the named max_texts, held_out_texts and reference_factor
      (`services.config.amortize.SIZES`); `settings` are `AmortizeSettings` fields (max_texts, held_out_texts,
      reference_factor, seed, teacher_minutes, ...), and win over the size's. With `teacher_minutes`, the teacher
      stops starting parts after that many minutes and `services.amortize.teacher.TeacherUnfinished` is raised:
      the parts are kept in `cache`, and the same call continues them (a long teacher in several invocations).
    - `cache`: the teacher's resumable parts (default: `<output>.teacher` beside `output`).
    - `dask`: run the teacher as Dask tasks, on `"local"` (a LocalCluster of `dask_workers` workers) or a scheduler
      address such as `tcp://host:8786`.
    - `title`: the report's title (default: "Student of <teacher>")."""
    spec = classifier
    if not isinstance(classifier, TrainedClassifier):
        classifier = bundles.task_classifier(classifier)
    architecture(classifier.model)  # an unsupported family stops here, naming the supported ones
    if teacher_settings is not None and n_samples is not None:
        raise InputError("give teacher_settings or n_samples, not both")
    try:
        chosen_teacher = (Teacher(teacher, dict(teacher_settings)) if teacher_settings is not None
                          else Teacher.default(teacher, n_samples, seed=settings.get("seed", 0)))
    except ValueError as error:
        raise InputError(f"n_samples: {error}") from None
    chosen = AmortizeSettings(teacher=chosen_teacher, **sized(sizes, settings, "sizes"))
    cluster = None if dask is None else dask_settings(
        {"address": dask, "n_workers": dask_workers, "threads_per_worker": 1, "methods": None,
         "batches_per_task": 1, "retries": 1}, device)
    output = Path(output)
    target = resolve_device(device)
    classifier.model.to(target)
    context = None if isinstance(spec, TrainedClassifier) else {"classifier_spec": str(spec)}
    result = amortize(classifier, texts, ids, chosen, Path(cache) if cache else output.with_name(output.name + ".teacher"),
                      dask=cluster, device=target, context=context)
    bundles.write_bundle(student_bundle(result, chosen, classifier, title or f"Student of {teacher}"), output)
    return StudentExplainer.from_folder(output, classifier, device=device)
