"""The coordinator daemon: job specs, the job store, the job life cycle, and the `vfl` CLI.

It never holds data, keys, activations or derivatives.
"""
