"""The benchmarks: each module a script run from the repository root as
`python -m bench.NAME` (bench/README.md lists them with their measured tables), and the
helpers they share (data sets, job specs, the cryptographic floor, /proc readers).
"""
