"""The errors of `vfl attack`'s analysis:

AttackError       the base
├── ViewError     a party's recorded view is missing or does not fit the job
└── DataError     the job's table cannot be attacked as asked (a task that is not
                  binary, a label file that cannot be permuted)
"""

from __future__ import annotations


class AttackError(Exception):
    """Base of this package's errors."""


class ViewError(AttackError):
    """A party's recorded view is missing or does not fit the job."""


class DataError(AttackError):
    """The job's table cannot be attacked as asked."""
