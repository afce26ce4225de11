"""Scoring with stored models: batch prediction jobs and online scoring."""
