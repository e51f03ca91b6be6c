from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"format": "json"}]})

    format: Literal["json"] = Field("json", description="Archive format; JSON is the only one.")


class EraseIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"dry_run": True}]})

    dry_run: bool = Field(False, description="Count what would be deleted and delete nothing; "
                          "writes are not blocked.")
