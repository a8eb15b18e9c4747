"""Everything people read or look at, from a run's tables: Markdown tables (`tables`), charts (`charts`,
`afn_charts`), HTML pages (`pages`), the cross-task, amortize and AFN reports (`crosstask`, `amortize`, `afn`) and
the results record, docs/results.md and README's blocks (`results`; its cost and timing tables in `cost`, the
rewriting of kept sections and marked blocks in `rewrite`), and the ablation's selection rules (`selection_rules`). The pipelines' report nodes and
`learned-attribution results` call the same functions."""
