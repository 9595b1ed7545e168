"""Benchmarks: each module measures a capability against a baseline in the same run and
writes bench/results/<name>.json and .md. `python -m bench` runs them all."""
