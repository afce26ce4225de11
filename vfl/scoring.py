"""Online scoring by id at a model's active party (`PartyService.Predict`), what `vfl score`
and `Client.score` both call, and its typed answer (`Scores` of one `Score` per id).

The active party looks each id's row up and runs the model's forward with every passive
party; an id it or a passive party does not hold comes back with an error, the others
are scored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from vfl.coordinator.errors import CoordinatorError, PartyUnavailable, UnknownModel
from vfl.errors import translated
from vfl.proto import party_pb2 as pb, party_pb2_grpc
from vfl.rpc import Tls, dial

MAX_IDS = 1024  # ids in one Predict request; more are sent as several
_ERRORS = {pb.ID_ERROR_UNKNOWN_ID: "unknown_id", pb.ID_ERROR_NOT_AT_PEER: "not_at_peer"}


@dataclass(frozen=True)
class Score:
    """One id's score: `values` by column ("score" for a binary model, "p_<class>" for
    multiclass, "value" for regression) and the predicted class; or, if it was not
    scored, `error` ("unknown_id": the active party holds no such row, "not_at_peer": a
    passive party does not) and `message`."""

    id: str
    values: dict[str, float]
    predicted_class: str | None
    error: str | None
    message: str

    @property
    def ok(self) -> bool:
        """True if this id was scored."""
        return self.error is None

    def to_plain(self) -> dict[str, Any]:
        """As `vfl score --json` prints it: {"id", <column>: value, ..., "class"} or
        {"id", "error", "message"}."""
        if self.error is not None:
            return {"id": self.id, "error": self.error, "message": self.message}
        item: dict[str, Any] = {"id": self.id, **self.values}
        if self.predicted_class:
            item["class"] = self.predicted_class
        return item


@dataclass(frozen=True)
class Scores:
    """The scores of a request, one per id in the request's order."""

    model_id: str
    columns: tuple[str, ...]
    results: tuple[Score, ...]

    def __iter__(self) -> Iterator[Score]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, row_id: str) -> Score:
        """The score of id `row_id` (the first, if it was asked for twice).

        Raises:
            KeyError: the id was not asked for.
        """
        for score in self.results:
            if score.id == row_id:
                return score
        raise KeyError(row_id)

    @property
    def ok(self) -> bool:
        """True if every id was scored."""
        return all(s.ok for s in self.results)

    def to_plain(self) -> dict[str, Any]:
        """As `vfl score --json` prints it."""
        return {
            "model": self.model_id,
            "columns": list(self.columns),
            "results": [s.to_plain() for s in self.results],
        }


def from_proto(resp: pb.PredictResponse) -> Scores:
    """The typed form of a `PredictResponse`."""
    return Scores(resp.model_id, tuple(resp.columns), tuple(_score(resp, r) for r in resp.results))


def _score(resp: pb.PredictResponse, r: pb.IdScore) -> Score:
    if r.error:
        return Score(r.id, {}, None, _ERRORS.get(r.error, "error"), r.message)
    values = dict(zip(resp.columns, r.values, strict=True))
    return Score(r.id, values, r.predicted_class or None, None, "")


def score_at(
    address: str,
    tls: Tls | None,
    model_id: str,
    ids: Sequence[str],
    *,
    expect: str | None = None,
    timeout: float = 60.0,
) -> Scores:
    """Score `ids` with model `model_id` at its active party's daemon at `address` (with
    TLS, its certificate must name `expect`), `MAX_IDS` per request.

    Raises:
        PartyUnavailable: the party is unreachable, or a passive party did not answer
            (names the cause and the fix).
        ScoringBusy: the party refused the request at its capacity, at once; retry after
            its `retry_after_s`.
        UnknownModel: the party holds no part of the model.
        AccessDenied: this identity may not score there.
        CoordinatorError: the party refused the request (e.g. it is the model's passive
            party, or no id was given); the message names the fix.
    """
    chunks = [list(ids[i : i + MAX_IDS]) for i in range(0, len(ids), MAX_IDS)] or [[]]
    answers = []
    with (
        translated(
            address,
            tls is not None,
            expect,
            missing=UnknownModel,
            refused=CoordinatorError,
            unreachable=PartyUnavailable,
        ),
        dial(address, tls, expect=expect) as channel,
    ):
        stub = party_pb2_grpc.PartyServiceStub(channel)  # type: ignore[no-untyped-call]
        for chunk in chunks:
            request = pb.PredictRequest(model_id=model_id, ids=chunk)
            answers.append(from_proto(stub.Predict(request, timeout=timeout)))
    first = answers[0]
    return Scores(first.model_id, first.columns, tuple(s for a in answers for s in a.results))
