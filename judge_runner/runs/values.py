"""The value types of run-file fields: a share in [0, 1], one that is null for an off-topic query, and a
metric value (null for R@10 without expected sources), each with the JSON Schema it is written as.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, WithJsonSchema

_UNIT_SCHEMA = {"type": "number", "minimum": 0, "maximum": 1}
# a value in [0, 1]; None only where the reader found no value it could trust (never written)
Unit = Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False), WithJsonSchema(_UNIT_SCHEMA)]
# a score that is null for an off-topic query (scored on abstention, format version 2)
MaybeUnit = Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False), WithJsonSchema({"anyOf": [_UNIT_SCHEMA, {"type": "null"}]})]
# a metric value: None is written for R@10 when a query has no expected sources
MetricValue = Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False), WithJsonSchema({"anyOf": [_UNIT_SCHEMA, {"type": "null"}]})]
