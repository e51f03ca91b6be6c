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
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    StringConstraints,
    field_validator,
    model_validator,
)

from storage_adapters.identity import GCS_IMPERSONATION_ENDPOINT, S3_ROLE_ENDPOINT

from .seed_spelling import snake_body, snake_keys

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
Region = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64,
                                          pattern=r"^[A-Za-z0-9][A-Za-z0-9\-]*$")]
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
        data = snake_keys(data, cls.model_fields)  # the seed's camelCase names too
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

    bucket: S3Bucket = Field(description="The S3 bucket name.", examples=["acme-memories"])
    region: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        None, description="The bucket's region.", examples=["eu-west-1"])
    endpoint_url: Url | None = Field(
        None, description="An S3-compatible endpoint (MinIO, R2, …); it must be allowed by "
        "MEMPLANE_ALLOWED_ENDPOINTS. Default: AWS.")
    access_key_id: Annotated[str, StringConstraints(max_length=128)] | None = Field(
        None, description="Access key id of credentials for this bucket (with "
        "secret_access_key).")
    secret_access_key: SecretStr | None = Field(
        None, description="Secret of the access key; stored encrypted, never shown again.")
    session_token: SecretStr | None = Field(
        None, description="Session token of temporary credentials; stored encrypted.")
    role_arn: Annotated[str, StringConstraints(
        strip_whitespace=True, max_length=2048,
        pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$")] | None = \
        Field(None, description="A role this server assumes (STS AssumeRole, ExternalId = "
                                "your tenant id) instead of keys; not with endpoint_url.")

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
        if self.role_arn is not None and self.endpoint_url is not None:
            raise ValueError(S3_ROLE_ENDPOINT)
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

    bucket: GcsBucket = Field(description="The GCS bucket name.", examples=["acme-memories"])
    project: Annotated[str, StringConstraints(max_length=128)] | None = Field(
        None, description="The Google Cloud project id.")
    endpoint: Url | None = Field(
        None, description="A GCS-compatible endpoint; it must be allowed by "
        "MEMPLANE_ALLOWED_ENDPOINTS. Default: Google's.")
    credentials_info: SecretStr | None = Field(
        None, description="The service account key, as a JSON object or its JSON text.")
    impersonate_service_account: Annotated[str, StringConstraints(
        strip_whitespace=True, max_length=320,
        pattern=r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.gserviceaccount\.com$")] | None = Field(
        None, description="A service account this server impersonates instead of a key: one "
        "the operator binds to your tenant (MEMPLANE_GCS_IMPERSONATION_ALLOWED); not with "
        "endpoint.")
    anonymous: bool = Field(False, description="No credentials at all (public buckets).")
    use_batch: bool = Field(
        True, description="Delete in batch requests (real GCS); emulators need false.")
    region: Region | None = Field(
        None, description="The bucket's location (data residency), e.g. europe-west1 or EU; "
        "checked against the bucket's own location, case-insensitively.",
        examples=["europe-west1"])

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
        if self.impersonate_service_account is not None and self.endpoint is not None:
            raise ValueError(GCS_IMPERSONATION_ENDPOINT)
        return self

    @property
    def bucket_name(self) -> str | None:
        return self.bucket

    @property
    def region_name(self) -> str | None:
        return self.region

    @property
    def endpoint_name(self) -> str | None:
        return self.endpoint


class AzureConnection(_Connection):
    storage_type: ClassVar[str] = "azure"
    secret_fields: ClassVar[tuple[str, ...]] = ("connection_string", "account_key", "sas_token")

    container: AzureContainer = Field(description="The blob container name.",
                                      examples=["memories"])
    connection_string: SecretStr | None = Field(
        None, description="A connection string with AccountKey or SharedAccessSignature; "
        "stored encrypted. Or give account_url with account_key or sas_token.")
    account_url: Url | None = Field(
        None, description="https://<account>.blob.core.windows.net (or an allowed endpoint).")
    account_key: SecretStr | None = Field(None, description="The storage account key; stored "
                                          "encrypted.")
    sas_token: SecretStr | None = Field(None, description="A SAS token for the container; "
                                        "stored encrypted.")
    region: Region | None = Field(
        None, description="The storage account's region (data residency), e.g. westeurope. "
        "Azure's data plane does not report it, so it is recorded as declared.",
        examples=["westeurope"])

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
    def region_name(self) -> str | None:
        return self.region

    @property
    def endpoint_name(self) -> str | None:
        return self.account_url


class LocalConnection(_Connection):
    storage_type: ClassVar[str] = "local"

    root: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                           max_length=1000)] = Field(
        description="An absolute directory on the server, under one of "
        "MEMPLANE_LOCAL_STORAGE_ROOTS.", examples=["/srv/memplane/buckets/acme"])

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


_TYPE = "Which kind of bucket; selects the fields of connection_config."


class S3ConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"storage_type": "s3", "connection_config": {
            "bucket": "acme-memories", "region": "eu-west-1",
            "role_arn": "arn:aws:iam::123456789012:role/memplane-acme"}}]})
    storage_type: Literal["s3"] = Field(description=_TYPE)
    connection_config: S3Connection = Field(description="The S3 bucket and its credentials.")


class GCSConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"storage_type": "gcs", "connection_config": {
            "bucket": "acme-memories", "project": "acme",
            "impersonate_service_account": "memplane@acme.iam.gserviceaccount.com"}}]})
    storage_type: Literal["gcs"] = Field(description=_TYPE)
    connection_config: GCSConnection = Field(description="The GCS bucket and its credentials.")


class AzureConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"storage_type": "azure", "connection_config": {
            "container": "memories", "account_url": "https://acme.blob.core.windows.net",
            "sas_token": "sv=2024-01-01&ss=b&srt=co&sp=rwdl&sig=..."}}]})
    storage_type: Literal["azure"] = Field(description=_TYPE)
    connection_config: AzureConnection = Field(description="The container and its "
                                               "credentials.")


class LocalConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"storage_type": "local", "connection_config": {"root": "/srv/memplane/buckets/acme"}}]})
    storage_type: Literal["local"] = Field(description=_TYPE)
    connection_config: LocalConnection = Field(description="A directory on the server.")


StorageConfigIn = Annotated[
    S3ConfigIn | GCSConfigIn | AzureConfigIn | LocalConfigIn,
    # The seed's {"storageType", "connectionConfig"} too: renamed before the union picks
    # its member (Discriminator, not Field(discriminator=...), keeps that order in FastAPI).
    Discriminator("storage_type"),
    BeforeValidator(snake_body),
]


class StorageConfigOut(BaseModel):
    """A configuration as the API shows it: never a secret, only which secrets are set."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID = Field(description="The configuration's id.")
    storage_type: str = Field(description="s3, gcs, azure or local.")
    bucket: str | None = Field(description="The bucket, container or directory.")
    prefix: str = Field(description="The effective object prefix: '<prefix>/<tenant id>'.")
    region: str | None = Field(description="The bucket's region, if any.")
    endpoint: str | None = Field(description="The custom endpoint, if any.")
    connection_config: dict[str, Any] = Field(description="The configuration without its "
                                              "secrets.")
    secrets_set: list[str] = Field(description="Names of the secret fields stored encrypted.")
    versioning: bool | None = Field(description="Whether the bucket keeps object versions "
                                    "(null: unknown).")
    soft_delete_days: float | None = Field(description="The bucket's soft-delete retention, "
                                           "if any.")
    object_lock: bool | None = Field(description="Whether object lock / immutability is on.")
    is_active: bool = Field(description="True for the configuration new writes use.")
    created_at: datetime = Field(description="When it was configured (UTC).")
    storage_config_id: str = Field(description="The configuration's public id, 'sc_…' (what "
                                   "an agent's user memory names).")
    name: str | None = Field(None, description="The configuration's name, if it has one.")
    is_default: bool = Field(description="True for the tenant's default configuration (the "
                             "same as is_active).")
    declared_region: str | None = Field(None, description="The region given in "
                                        "connection_config, if any.")
    region_verified: bool = Field(description="True when the bucket itself reported its "
                                  "region (S3, GCS); false when it is only declared (Azure) "
                                  "or unknown.")


class StorageConfigPage(BaseModel):
    items: list[StorageConfigOut] = Field(description="The tenant's storage configurations, "
                                          "the default first, then by creation.")
    next_cursor: str | None = Field(None, description="Always null: a tenant has few "
                                    "configurations and they come in one page.")


ConfigName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                              max_length=100, pattern=r"^[^\x00-\x1f\x7f]+$")]
_NAME = "A name for this configuration, unique among the tenant's configurations."
_MAKE_DEFAULT = "Make it the tenant's default (where new memories go) at once."


class NamedS3ConfigIn(S3ConfigIn):
    name: ConfigName = Field(description=_NAME, examples=["eu-archive"])
    make_default: bool = Field(False, description=_MAKE_DEFAULT)


class NamedGCSConfigIn(GCSConfigIn):
    name: ConfigName = Field(description=_NAME, examples=["eu-gcs"])
    make_default: bool = Field(False, description=_MAKE_DEFAULT)


class NamedAzureConfigIn(AzureConfigIn):
    name: ConfigName = Field(description=_NAME, examples=["eu-azure"])
    make_default: bool = Field(False, description=_MAKE_DEFAULT)


class NamedLocalConfigIn(LocalConfigIn):
    name: ConfigName = Field(description=_NAME, examples=["on-prem"])
    make_default: bool = Field(False, description=_MAKE_DEFAULT)


NamedStorageConfigIn = Annotated[
    NamedS3ConfigIn | NamedGCSConfigIn | NamedAzureConfigIn | NamedLocalConfigIn,
    Discriminator("storage_type"),
    BeforeValidator(snake_body),
]


class StorageConfigRename(BaseModel):
    """What ``PUT /v1/storage/configs/{id}`` may change. The bucket, prefix and credentials of
    a configuration never change in place (pointers name it): create a new one instead."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"name": "eu-archive"}]})
    name: ConfigName = Field(description=_NAME)


class StorageHealthOut(BaseModel):
    ok: bool = Field(description="True when the write/read/delete probe succeeded.")
    reachable: bool = Field(description="True when the bucket answered at all.")
    probe: str = Field(description="What the write/read/delete probe did.")
    problem: str | None = Field(
        None, description="Why the probe failed: unreachable, auth_failed, bucket_not_found, "
                          "permission_denied or endpoint_not_allowed; null when it succeeded.")
    latency_ms: float = Field(description="How long the probe took, in milliseconds.")
    config_id: uuid.UUID = Field(description="The configuration probed (the active one).")
    storage_type: str = Field(description="s3, gcs, azure or local.")
    bucket: str | None = Field(description="The bucket, container or directory.")
    prefix: str = Field(description="The object prefix probed.")
    region: str | None = Field(description="The bucket's region, if any.")
    versioning: bool | None = Field(description="Whether the bucket keeps versions (null: "
                                    "could not tell).")
    soft_delete_days: float | None = Field(description="Soft-delete retention, if any.")
    object_lock: bool | None = Field(description="Whether object lock is on.")
    retention_days: float | None = Field(description="Default retention of locked objects, "
                                         "if any.")
    notes: list[str] = Field(description="What an erasure on this bucket will and will not "
                             "reach (versions, soft delete, locks), in sentences.")
    checked_at: datetime = Field(description="When the probe ran (UTC).")
    storage_config_id: str | None = Field(None, description="The probed configuration's "
                                          "public id, 'sc_…'.")
    declared_region: str | None = Field(None, description="The region declared in the "
                                        "configuration, if any.")
    region_verified: bool = Field(False, description="True when the bucket reported its own "
                                  "region and it matches the declared one (or none was "
                                  "declared); false when the backend does not report it.")
