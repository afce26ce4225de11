"""CELU-VFL local updates: workset table, uniform sampling, instance weighting.

Nothing in this package imports grpc, `party` or `coordinator`.
"""
