"""What a tenant admin sends to configure their bucket, and what the API answers.

``connection_config`` is a discriminated union on ``storage_type``. Secret fields are
``SecretStr``: they are split off before anything is stored (encrypted with the server key)
and never appear in an answer, a log line or an audit row.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    field_validator,
    model_validator,
)

GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
# The clouds' own naming rules, checked here so a bad name is the caller's 422, not a crash.
def _named(pattern: str, rule: str) -> Any:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(rule)
        return value

    return AfterValidator(check)


S3Bucket = Annotated[Name, _named(
    r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]",
    "an S3 bucket name is 3-63 lowercase letters, digits, dots or hyphens, starting and "
    "ending with a letter or digit")]
GcsBucket = Annotated[Name, _named(
    r"[a-z0-9][a-z0-9._\-]{1,220}[a-z0-9]",
    "a GCS bucket name is 3-222 lowercase letters, digits, dots, dashes or underscores, "
    "starting and ending with a letter or digit")]
AzureContainer = Annotated[Name, _named(
    r"[a-z0-9]([a-z0-9]|-[a-z0-9]){2,62}",
    "an Azure container name is 3-63 lowercase letters, digits or single hyphens, starting "
    "and ending with a letter or digit")]
Prefix = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200,
                                          pattern=r"^[A-Za-z0-9._\-/]*$")]
Url = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255,
                                       pattern=r"^https?://")]


class _Connection(BaseModel):
    """Common rules: unknown fields are refused with a sentence listing the allowed ones."""

    model_config = ConfigDict(extra="forbid")
    storage_type: ClassVar[str]
    secret_fields: ClassVar[tuple[str, ...]] = ()

    prefix: Prefix | None = Field(
        None, description="Objects go under '<prefix>/<tenant id>/' (default 'memplane').")

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(str(k) for k in data if k not in cls.model_fields)
            if unknown:
                names = ", ".join(repr(k) for k in unknown)
                allowed = ", ".join(sorted(cls.model_fields))
                raise ValueError(
                    f"{cls.storage_type} connection_config does not accept {names}; "
                    f"the fields it accepts are: {allowed}")
        return data

    @field_validator("prefix")
    @classmethod
    def _clean_prefix(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip("/")
        if any(part in ("", ".", "..") for part in value.split("/")) and value:
            raise ValueError("prefix segments must not be empty, '.' or '..'")
        return value or None

    def public(self) -> dict[str, Any]:
        """The non-secret settings, as stored in ``storage_configs.connection_config``."""
        return self.model_dump(exclude=set(self.secret_fields), exclude_none=True)

    def secrets(self) -> dict[str, str]:
        """The secret settings that were given, in plain text (to be encrypted at once)."""
        values: dict[str, str] = {}
        for name in self.secret_fields:
            value = getattr(self, name)
            if value is not None:
                values[name] = value.get_secret_value()
        return values

    @property
    def bucket_name(self) -> str | None:
        return None

    @property
    def region_name(self) -> str | None:
        return None

    @property
    def endpoint_name(self) -> str | None:
        return None


class S3Connection(_Connection):
    storage_type: ClassVar[str] = "s3"
    secret_fields: ClassVar[tuple[str, ...]] = ("secret_access_key", "session_token")

    bucket: S3Bucket
    region: Annotated[str, StringConstraints(max_length=64)] | None = None
    endpoint_url: Url | None = None
    access_key_id: Annotated[str, StringConstraints(max_length=128)] | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    role_arn: Annotated[str, StringConstraints(
        strip_whitespace=True, max_length=2048,
        pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$")] | None = \
        Field(None, description="A role this server assumes (STS AssumeRole, ExternalId = "
                                "your tenant id) instead of keys.")

    @model_validator(mode="after")
    def _own_credentials(self) -> S3Connection:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("give access_key_id and secret_access_key together")
        if self.role_arn is not None and self.access_key_id is not None:
            raise ValueError("give access_key_id and secret_access_key, or role_arn, not both")
        if self.role_arn is None and self.access_key_id is None:
            raise ValueError(
                "give access_key_id and secret_access_key, or role_arn (a role this server "
                "assumes with ExternalId = your tenant id): this server does not lend its own "
                "AWS credentials")
        if self.session_token is not None and self.access_key_id is None:
            raise ValueError("session_token goes with access_key_id and secret_access_key")
        return self

    @property
    def bucket_name(self) -> str | None:
        return self.bucket

    @property
    def region_name(self) -> str | None:
        return self.region

    @property
    def endpoint_name(self) -> str | None:
        return self.endpoint_url


class GCSConnection(_Connection):
    storage_type: ClassVar[str] = "gcs"
    secret_fields: ClassVar[tuple[str, ...]] = ("credentials_info",)

    bucket: GcsBucket
    project: Annotated[str, StringConstraints(max_length=128)] | None = None
    endpoint: Url | None = None
    credentials_info: SecretStr | None = Field(
        None, description="The service account key, as a JSON object or its JSON text.")
    impersonate_service_account: Annotated[str, StringConstraints(
        strip_whitespace=True, max_length=320,
        pattern=r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.gserviceaccount\.com$")] | None = Field(
        None, description="A service account this server impersonates instead of a key.")
    anonymous: bool = Field(False, description="No credentials at all (public buckets).")
    use_batch: bool = Field(
        True, description="Delete in batch requests (real GCS); emulators need false.")

    @field_validator("credentials_info", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return json.dumps(value)
        return value

    @field_validator("credentials_info")
    @classmethod
    def _is_json_object(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        try:
            parsed = json.loads(value.get_secret_value())
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ValueError("credentials_info must be the service account key as a JSON "
                             "object (or its JSON text)")
        if parsed.get("token_uri") != GOOGLE_TOKEN_URI:
            # Tokens are only ever requested from Google, whatever the key says.
            parsed["token_uri"] = GOOGLE_TOKEN_URI
            return SecretStr(json.dumps(parsed))
        return value

    @model_validator(mode="after")
    def _own_credentials(self) -> GCSConnection:
        given = [self.credentials_info is not None,
                 self.impersonate_service_account is not None, self.anonymous]
        if sum(given) != 1:
            raise ValueError(
                "give exactly one of credentials_info (a service account key), "
                "impersonate_service_account (an account this server may impersonate) or "
                "anonymous: true (a public bucket): this server does not lend its own Google "
                "credentials")
        return self

    @property
    def bucket_name(self) -> str | None:
        return self.bucket

    @property
    def endpoint_name(self) -> str | None:
        return self.endpoint


class AzureConnection(_Connection):
    storage_type: ClassVar[str] = "azure"
    secret_fields: ClassVar[tuple[str, ...]] = ("connection_string", "account_key", "sas_token")

    container: AzureContainer
    connection_string: SecretStr | None = None
    account_url: Url | None = None
    account_key: SecretStr | None = None
    sas_token: SecretStr | None = None

    @model_validator(mode="after")
    def _one_way_in(self) -> AzureConnection:
        by_url = self.account_url is not None
        if self.connection_string is not None and (by_url or self.account_key or self.sas_token):
            raise ValueError("give either connection_string, or account_url with account_key "
                             "or sas_token, not both")
        if self.connection_string is None:
            if not by_url or (self.account_key is None) == (self.sas_token is None):
                raise ValueError("give connection_string, or account_url with exactly one of "
                                 "account_key and sas_token")
        elif not re.search(r"(?i)(^|;)\s*(AccountKey|SharedAccessSignature)=[^;]",
                           self.connection_string.get_secret_value()):
            raise ValueError("the connection_string must carry AccountKey or "
                             "SharedAccessSignature: this server does not lend its own "
                             "credentials")
        return self

    @property
    def bucket_name(self) -> str | None:
        return self.container

    @property
    def endpoint_name(self) -> str | None:
        return self.account_url


class LocalConnection(_Connection):
    storage_type: ClassVar[str] = "local"

    root: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                           max_length=1000)]

    @field_validator("root")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or "\x00" in value:
            raise ValueError("root must be an absolute directory path on the server")
        if any(part in (".", "..") for part in value.split("/")):
            raise ValueError("root must not contain '.' or '..' segments")
        return value

    @property
    def bucket_name(self) -> str | None:
        return self.root


class S3ConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    storage_type: Literal["s3"]
    connection_config: S3Connection


class GCSConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    storage_type: Literal["gcs"]
    connection_config: GCSConnection


class AzureConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    storage_type: Literal["azure"]
    connection_config: AzureConnection


class LocalConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    storage_type: Literal["local"]
    connection_config: LocalConnection


StorageConfigIn = Annotated[
    S3ConfigIn | GCSConfigIn | AzureConfigIn | LocalConfigIn,
    Field(discriminator="storage_type"),
]


class StorageConfigOut(BaseModel):
    """A configuration as the API shows it: never a secret, only which secrets are set."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    storage_type: str
    bucket: str | None
    prefix: str = Field(description="The effective object prefix: '<prefix>/<tenant id>'.")
    region: str | None
    endpoint: str | None
    connection_config: dict[str, Any]
    secrets_set: list[str] = Field(description="Names of the secret fields stored encrypted.")
    versioning: bool | None
    soft_delete_days: float | None
    object_lock: bool | None
    is_active: bool
    created_at: datetime


class StorageHealthOut(BaseModel):
    ok: bool
    reachable: bool
    probe: str = Field(description="What the write/read/delete probe did.")
    problem: str | None = Field(
        None, description="Why the probe failed: unreachable, auth_failed, bucket_not_found, "
                          "permission_denied or endpoint_not_allowed; null when it succeeded.")
    latency_ms: float
    config_id: uuid.UUID
    storage_type: str
    bucket: str | None
    prefix: str
    region: str | None
    versioning: bool | None
    soft_delete_days: float | None
    object_lock: bool | None
    retention_days: float | None
    notes: list[str]
    checked_at: datetime
