from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["json"] = "json"


class EraseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dry_run: bool = False
