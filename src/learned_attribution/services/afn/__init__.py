"""AFN (activation flow): token strength as the L2 norm of an intermediate layer's hidden state, HIGH/LOW
activation buckets, activation shift between paired inputs, and a layer-by-layer comparison (SPEC §10).

Plain modules, no Kedro: `settings` (the parsed `afn` block), `corpus` (SST phrases, user files, skips), `pairs`
(shift pairs), `build` (the corpus and pair tables from the settings), `strength` (tokenizing and hidden states),
`buckets` (threshold, HIGH/LOW, ranks), `alignment` (word and token alignment of two inputs), `shift` (Delta_i,
R_H), `measure` (the strength and shift tables), `layers` (per-layer comparison and headline numbers). The report
and the plots are `services/reporting/afn.py` and `afn_charts.py`; the MLflow run is the tracking hook's
(`adapters/hooks/runs.py`).
"""
