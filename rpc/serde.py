"""Plain Python values from protobuf messages, for JSON output and the job store's metrics.

`json_format.MessageToDict` writes 64-bit integers as strings (JSON numbers are doubles);
our values stay far below 2^53, so `to_plain` keeps them numbers, as a user's script
reading `vfl run --json` expects. Every field is there, at its default if unset (0, "",
[], {}), except fields with presence (`optional`, messages) that are not set.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def to_plain(message: Message) -> dict[str, Any]:
    """The fields of `message` as a dict of numbers, strings, lists and dicts."""
    return {
        field.name: _value(field, getattr(message, field.name))
        for field in message.DESCRIPTOR.fields
        if not field.has_presence or message.HasField(field.name)
    }


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        entry = field.message_type.fields_by_name["value"]
        return {k: _scalar(entry, v) for k, v in value.items()}
    if field.is_repeated:
        return [_scalar(field, v) for v in value]
    return _scalar(field, value)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None:
        return to_plain(value)
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value
