"""The record: small tables committed to git that the docs' numbers are regenerated from. `parts.py` stores them
(CSV + a sidecar with checksum and fingerprint, one run at a time), `baselines.py` fills them with every baseline on
every example of every fold, in resumable parts, and `report.py` reads them back into the baselines table."""
