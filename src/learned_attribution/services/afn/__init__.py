"""AFN (activation flow): token strength as the L2 norm of an intermediate layer's hidden state, HIGH/LOW
activation buckets, activation shift between paired inputs, and a layer-by-layer comparison (SPEC §10).

Plain modules, no Kedro: `words` (content/function/punctuation), `corpus` (SST phrases and user files),
`strength` (tokenizing and hidden states), `buckets` (threshold, HIGH/LOW, ranks), `alignment` (word and
token alignment of two inputs), `pairs` (shift pairs), `shift` (Delta_i, R_H), `layers` (per-layer
comparison and headline numbers), `plots`, `report`, `tracking` (MLflow).
"""
