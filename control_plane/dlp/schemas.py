from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .detect import KINDS

Mode = Literal["off", "flag", "redact", "refuse"]
_MODES = ("off: nothing is scanned; flag: a memory or entry is stored as sent and tagged "
          "sensitive:<kind>; redact: each detected value is stored as [redacted:<kind>]; "
          "refuse: the write is refused with 422 sensitive_data and nothing is written.")


class DlpPolicyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"mode": "refuse"}, {"mode": "redact", "kinds": ["card", "ssn", "password"]}]})

    mode: Mode = Field(description=_MODES, examples=["refuse"])
    kinds: list[str] | None = Field(
        None, max_length=len(KINDS), description="Only these kinds are detected: "
        f"{', '.join(KINDS)}; omitted or null: all of them.", examples=[["card", "ssn"]])

    @field_validator("kinds")
    @classmethod
    def _known(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        unknown = [k for k in value if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown kind(s) {', '.join(repr(k) for k in unknown)}; the "
                             f"kinds are {', '.join(KINDS)}")
        return [k for k in KINDS if k in value]


class DlpPolicyOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Mode = Field(description=_MODES)
    kinds: list[str] = Field(description="The kinds detected.")
    is_default: bool = Field(description="true: the tenant never set a policy, and these are "
                             "the defaults (flag, every kind).")
    extracted_mode: Literal["refuse"] = Field(
        "refuse", description="What happens to a memory the remember extractor produced: "
        "always refused when it holds any detected kind, whatever the mode.")
    updated_at: datetime | None = Field(description="When the policy was last set (UTC); "
                                        "null while the defaults apply.")
