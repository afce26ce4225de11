"""Cryptographic primitives and the multi-party protocols written against `Channel`.

Nothing in this package imports grpc, `party` or `coordinator`.
"""
