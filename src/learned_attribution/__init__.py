"""Learned token attribution: ExpNet, ExpNet+ and amortized students, scored against human rationales across tasks.

The public API (no Kedro): `FoldExplainer` (a trained fold), `StudentExplainer` (an amortized student), the
`Explanation` they return, `fit` (train a student for your own classifier) and `fit_rationales` (refit a fold's
ExpNet+ on your own annotated examples). Layers, from the bottom:
`core` (data, models, explainers, metrics), `services` (evaluation, amortize, afn, reporting, tracking, the
bundle and the API), `adapters` (Kedro datasets and hooks, the CLI, serving) and `pipelines` (Kedro)."""

__version__ = "0.1.0"
__all__ = ["Explanation", "FoldExplainer", "StudentExplainer", "fit", "fit_rationales"]


def __getattr__(name: str):
    # The API loads torch and transformers (seconds): only when it is used, so that `import learned_attribution`
    # (Kedro's project settings, the CLI's start) stays light.
    if name in ("FoldExplainer", "StudentExplainer"):
        from learned_attribution.services import explain

        return getattr(explain, name)
    if name == "fit":
        from learned_attribution.services.amortize.fit import fit

        return fit
    if name == "fit_rationales":
        from learned_attribution.services.fewshot.refit import fit_rationales

        return fit_rationales
    if name == "Explanation":
        from learned_attribution.services.explanation import Explanation

        return Explanation
    raise AttributeError(f"module 'learned_attribution' has no attribute {name!r}")
