"""Exceptions of the `contract` package: what both daemons and the CLI share.

ContractError   base
└── SpecError   a job spec (or a party config's dataset entry) is malformed: names the
                field and the fix
"""

from __future__ import annotations


class ContractError(Exception):
    """Base class of the shared contract's errors."""


class SpecError(ContractError):
    """A job spec is invalid. The message names the field and how to fix it."""


def party_named(party_id: str, text: str) -> str:
    """`text` as party `party_id` said it, named for the party once: a message that
    begins with its name already is not prefixed again ("party 'shop': party 'shop': ...")."""
    prefix = f"party '{party_id}'"
    return text if text.startswith(prefix) else f"{prefix}: {text}"
