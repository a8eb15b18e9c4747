"""Few-shot: a fold's ExpNet+ refit on a few annotated examples of its held-out task.

- `suggest`: which of a user's texts to annotate (`learned-attribution suggest`), the rule the curve's
  `suggested` rows measure.
"""
