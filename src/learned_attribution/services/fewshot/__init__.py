"""Few-shot: a fold's ExpNet+ refit on a few annotated examples of its held-out task (the refit itself:
`core/models/learned/fewshot.py`).

- `choice`: the prior and schedule a fold refits at each k, chosen on its training tasks only, and what its folder
  keeps of the choice;
- `curve`: the fewshot pipeline's measurement: every k's draws (and the suggested examples) refit and scored on the
  held-out rationale test set beside the best baselines;
- `refit`: a user's refit on their own annotated examples with the fold's stored choice (`fit_rationales`,
  `learned-attribution fit --rationales`);
- `suggest`: which of a user's texts to annotate (`learned-attribution suggest`), the rule the curve's `suggested`
  rows measure.
"""
