"""One validated configuration object, read from ``MEMPLANE_*`` environment variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .secret_strength import random_bytes_in

# Hosted OpenAI-compatible APIs a tenant's summariser may use by default.
DEFAULT_SUMMARIZER_HOSTS = ("api.openai.com", "*.openai.azure.com", "api.mistral.ai",
                            "api.groq.com", "api.together.xyz", "openrouter.ai",
                            "api.deepseek.com", "api.fireworks.ai",
                            "generativelanguage.googleapis.com")
# What a server key must carry (secret_strength.py measures it): 16 random bytes, 32 hex
# digits or 22 base64 characters; the README's 64 hex digits also derive the signing key.
SERVER_KEY_MIN_BYTES = 16
_PLACEHOLDERS = {"", "changeme", "change-me", "secret", "memplane", "development"}
# The longest interval a checkpoint setting takes: past it a "since then" underflows datetime.
_A_YEAR = 365 * 24 * 3600.0
# Threads the API runs its synchronous routes in (anyio's thread pool; create_app sets it).
# One tenant's storage calls and waiters together may take at most half of them, all
# tenants' together fewer than all (storage_threads).
REQUEST_THREADS = 40


class Settings(BaseSettings):
    # A refused setting is named with its error, never with its value: a server key, token or
    # database URL with a password must not reach a log through a validation error.
    model_config = SettingsConfigDict(env_prefix="MEMPLANE_", extra="ignore",
                                      hide_input_in_errors=True)

    data_dir: Path = Field(Path(".memplane"), description="Home of the embedded default.")
    database_url: str | None = Field(
        None, description="SQLAlchemy URL; default: SQLite file in data_dir.")
    default_bucket_url: str | None = Field(
        None, description="Bucket for tenants without their own; default: data_dir/bucket.")
    public_url: str | None = Field(
        None, description="The URL clients reach the API at (https, through the TLS proxy in "
        "front of the server); `memplane doctor` checks it.")
    admin_key: SecretStr | None = Field(
        None, description="Admin key of the default tenant; also allowed to create tenants."
    )
    server_key: SecretStr | None = Field(
        None, description="Encrypts tenant credentials at rest. Required outside the embedded "
        "default."
    )
    create_default_tenant: bool = True
    keep_alive_seconds: int = Field(
        75, ge=1, le=3600, description="How long the server keeps an idle client connection "
        "open. Keep it above the idle timeout of any proxy or load balancer in front (AWS "
        "ALB: 60 s) and of the clients (the Python SDK, httpx: 5 s): the side that closes an "
        "idle connection must be the one that would reuse it, or a request sent as the "
        "server closes fails with no answer.")
    slow_request_seconds: float = Field(
        5.0, gt=0, description="A request that takes at least this long is logged as a "
        "warning (method, route template, status, duration and request id; never a path's "
        "values or a body), so a stall shows at the default log level with the id a client "
        "can quote.")
    max_body_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    max_object_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Largest value one memory may hold once "
        "serialised; a write or an append that would store more is refused with 413.")
    storage_call_deadline_seconds: float = Field(
        30.0, gt=0, description="How long one call to a bucket may take in all, however "
        "slowly the bucket answers (a streamed read: per 8 MiB part); then it fails as "
        "unreachable (503 storage_unavailable).")
    metrics_token: SecretStr | None = Field(
        None, description="When set, GET /metrics requires 'Authorization: Bearer <token>'.")
    # Secrets as files (a mounted Kubernetes Secret, a compose volume): read at start.
    server_key_file: Path | None = Field(
        None, description="A file holding MEMPLANE_SERVER_KEY; set one or the other.")
    receipt_signing_key_file: Path | None = Field(
        None, description="A file holding MEMPLANE_RECEIPT_SIGNING_KEY; set one or the other.")
    admin_key_file: Path | None = Field(
        None, description="A file holding MEMPLANE_ADMIN_KEY; set one or the other.")
    metrics_token_file: Path | None = Field(
        None, description="A file holding MEMPLANE_METRICS_TOKEN; set one or the other.")
    bootstrap_key_file: Path | None = Field(
        None, description="Where a generated admin key of the default tenant goes (a new "
        "file, mode 0600) instead of being printed; the start fails rather than overwrite "
        "an existing file.")
    audit_seal_interval_seconds: float = Field(0.5, gt=0)
    audit_checkpoint_seconds: float = Field(
        60.0, ge=0, le=_A_YEAR, description="While audit rows arrive, sign each tenant's chain "
        "head and write it into the tenant's bucket (audit/checkpoints/) at least this often.")
    audit_log_name: str = Field(
        "memplane", pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$", description="Names this "
        "deployment's audit transparency logs: a tenant's log has the origin "
        "'<name>/audit/<tenant id>' and its checkpoints are signed under the key name "
        "'<name>' (a domain name the operator owns keeps origins unique across deployments).")
    audit_tlog_checkpoint_seconds: float = Field(
        5.0, ge=0, le=_A_YEAR, description="While a tenant's audit tree grows, write a signed tlog "
        "checkpoint of it (and the consistency proof from the one before) into the tenant's "
        "bucket (audit/checkpoints/tlog/) at most this often.")
    reconcile_grace_seconds: float = Field(300.0, ge=0)
    sqlite_synchronous: str = Field(
        "FULL", pattern="^(OFF|NORMAL|FULL|EXTRA)$", description="SQLite's synchronous mode "
        "(the database runs in WAL mode). FULL, the default, syncs the log at each commit: an "
        "acknowledged write survives a power loss. NORMAL survives a crash of the process but "
        "can lose the last acknowledged writes on a power loss (docs/durability.md).")
    db_pool_size: int = Field(
        20, ge=1, description="Database connections each process keeps open; at a peak it "
        "opens up to half as many again and closes them once returned. Keep it at or above "
        "the number of requests a process serves at once: below that, connections are "
        "opened and closed all the time. On PostgreSQL, processes × 1.5 × this must fit "
        "within max_connections.")
    db_pool_recycle_seconds: int = Field(
        1800, ge=1, description="PostgreSQL: a pooled connection older than this is replaced "
        "when next handed out; set it below any idle timeout between this server and the "
        "database (a proxy, a load balancer).")
    db_pool_pre_ping: bool = Field(
        False, description="PostgreSQL: test each pooled connection with a round trip before "
        "handing it out, so one the database or a proxy closed is replaced instead of failing "
        "the request; costs that round trip on every checkout.")
    allow_local_storage: bool | None = Field(
        None, description="Let tenants configure a directory on this server as their bucket; "
        "default: allowed on the embedded default only."
    )
    local_storage_roots: list[Path] = Field(
        default_factory=list, description="Directories under which tenants may place a local "
        "bucket; default: data_dir/buckets. Anything else on the server stays off limits.")
    allowed_endpoints: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Custom storage endpoints tenants may use, comma "
        "separated: host patterns ('*.blob.core.windows.net', 'minio.corp.example') and CIDRs "
        "('10.20.0.0/16'). Default: none, only each backend's own storage endpoints. Loopback, "
        "private, link-local and metadata addresses are refused unless a CIDR covers them.")
    storage_calls_per_tenant: int = Field(
        8, ge=1, description="Calls to one tenant's own buckets a process runs at once; "
        "more wait (see the next two), so a slow or dead bucket holds at most these "
        "threads and those waiting. The default bucket is not limited.")
    storage_waiters_per_tenant: int = Field(
        8, ge=0, description="Calls that may wait for one of those slots; a call beyond "
        "them, or one that waited storage_wait_seconds, gets 503 storage_unavailable with "
        "problem storage_busy and Retry-After.")
    storage_wait_seconds: float = Field(
        2.0, ge=0, le=30, description="Longest a call waits for a slot of its tenant's "
        "storage calls.")
    storage_threads: int = Field(
        24, ge=1, description="Threads a process lets run or wait in calls to tenants' own "
        "buckets, all tenants together; the request threads beyond them stay free for "
        "everything else. A call beyond them gets 503 storage_busy.")
    storage_threads_reserved: int = Field(
        8, ge=0, description="The last of storage_threads, kept for tenants with fewer than "
        "two calls in their buckets: tenants whose buckets hang share the others.")
    gcs_impersonation_allowed: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="The Google service accounts each tenant may have "
        "this server impersonate (impersonate_service_account): entries '<tenant id>=<account>'"
        ", '*' wildcards allowed in the account, comma-separated or a JSON list. Default: none, "
        "no tenant may impersonate.")
    log_level: str = "INFO"
    run_background: bool = Field(True, description="Run the audit sealer inside the server.")
    background_process: bool = Field(
        True, description="`memplane serve` running jobs and embedding: the audit sealer and "
        "the search indexer run in a second process beside the server, started, restarted and "
        "stopped with it, so they never take the server's interpreter from its requests (on "
        "SQLite the two processes' writers take turns through a lock file beside the "
        "database); false keeps them threads of the server.")
    embed_on_write: bool = Field(True, description="Embed new and changed memories in the "
                                 "background after their write commits (semantic search); "
                                 "false leaves them unindexed.")
    search_cache_rows: int = Field(1_000_000, ge=0, description="Vector rows the in-memory "
                                   "search cache holds (LRU, per process).")
    search_cache_value_bytes: int = Field(64 * 1024 * 1024, ge=0, description="Bytes of "
                                          "verified values the search cache holds.")
    # Compliance jobs (export, erase); see control_plane/jobs/worker.py.
    run_jobs: bool = Field(True, description="Run a job worker thread inside the server "
                           "(with run_background); turn off when `memplane worker` runs them.")
    job_threads: int = Field(
        2, ge=1, le=64, description="Jobs a process runs side by side (`memplane serve` with "
        "run_jobs, each `memplane worker`): a long export of one tenant leaves the others "
        "to run another tenant's erasure meanwhile. Each running job holds a database "
        "connection for its steps.")
    job_lease_seconds: float = Field(30.0, gt=0)
    job_poll_interval_seconds: float = Field(0.5, gt=0)
    job_max_attempts: int = Field(3, ge=1)
    # Fairness between tenants; see control_plane/jobs/limits.py and supervisor.py.
    job_tenant_quota: int = Field(20, ge=1, description="Jobs of one kind a tenant may have "
                                  "queued or running at once; one more answers 429.")
    job_tenant_concurrency: int = Field(2, ge=1, description="Jobs of one tenant running at "
                                        "once across all workers, while others wait.")
    job_step_seconds: float = Field(600.0, gt=0, description="Longest a job may go without "
                                    "reporting progress; then its attempt is abandoned.")
    export_ttl_hours: float = Field(
        72.0, gt=0, description="An export's archive is deleted from the tenant's bucket this "
        "long after it was built; downloading it afterwards answers 410.")
    receipt_signing_key: SecretStr | None = Field(
        None, description="Ed25519 key that signs erasure receipts: base64 of the 32 raw bytes, "
        "or PEM (PKCS#8). Default on the embedded setup: data_dir/receipt-signing.key."
    )
    # Encryption at rest (DESIGN §6); see control_plane/plane/kek_providers.py for the providers.
    encryption: bool = Field(True, description="Envelope-encrypt every new object.")
    kek_provider: str = Field("local", pattern="^(local|aws-kms)$",
                              description="Where tenants' key-encryption keys live.")
    kek_keyring_path: Path | None = Field(
        None, description="Local key ring file (mode 0600); default: data_dir/keyring.json."
    )
    kek_aws_key_id: str | None = Field(None, description="KMS key id, ARN or alias.")
    kek_aws_region: str | None = None
    kek_aws_endpoint_url: str | None = None
    kek_aws_access_key_id: str | None = None
    kek_aws_secret_access_key: SecretStr | None = None
    kek_aws_allowed_key_refs: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="KMS keys (ids, ARNs or aliases; '*' wildcards; "
        "'{tenant_id}' stands for the tenant's id) a tenant admin may move its KEK to; "
        "comma-separated or a JSON list. Default: only MEMPLANE_KEK_AWS_KEY_ID.")
    key_cache_size: int = Field(10_000, ge=0, description="Unwrapped subject keys kept.")
    key_cache_seconds: float = Field(300.0, ge=0)
    auth_cache_seconds: float = Field(
        5.0, ge=0, description="How long a valid API key is trusted without looking it up "
                               "again; a key revoked on another replica works until then.")
    # The compactor (control_plane/compactor): when the worker queues the daily run.
    compactor_schedule: str = Field(
        "17 6 * * *", description="When job workers queue each active tenant's daily "
        "compaction: a cron expression in UTC (five fields), or 'off'. At most one run per "
        "tenant and UTC day however many workers tick; a worker down at that time catches up "
        "later the same day.")
    compactor_max_events_per_entry: int = Field(
        1000, ge=200, le=100_000, description="A bucket with more uncompressed events than "
        "this is summarised into several entries of about equal size, so one summary never "
        "reads an unbounded number of events.")

    # Retention (control_plane/retention): when the worker queues the daily retention run.
    retention_schedule: str = Field(
        "30 3 * * *", description="When job workers queue each tenant's daily retention run "
        "(policies and the ttl_days purge): a cron expression in UTC (five fields), or 'off'. "
        "At most one run per tenant and UTC day however many workers tick.")

    @field_validator("compactor_schedule", "retention_schedule")
    @classmethod
    def _cron(cls, value: str, info: ValidationInfo) -> str:
        from .schedules import parse_schedule

        # a bad expression is refused at start, naming it
        parse_schedule(value, f"MEMPLANE_{(info.field_name or '').upper()}")
        return value.strip()

    # Summarisers (control_plane/summarizers): the compactor's OpenAI-compatible endpoints.
    summarizer_public_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_SUMMARIZER_HOSTS), description="Hosted LLM "
        "APIs tenants may point their summariser at without the operator listing them "
        "(host patterns, comma separated or a JSON list); MEMPLANE_ALLOWED_ENDPOINTS adds to "
        "them. Their addresses must still be public.")
    summarizer_token_budget_per_run: int | None = Field(
        200_000, ge=1, description="Tokens one compactor run may spend on a tenant's "
        "summariser calls unless the tenant sets a smaller token_budget_per_run; when spent, "
        "the run stops cleanly and the remaining buckets wait for the next run.")
    summarizer_max_retry_wait_seconds: float = Field(
        30.0, ge=0, description="Longest wait before retrying a summariser call, whatever "
        "its Retry-After says.")
    summarizer_max_input_chars: int = Field(
        48_000, ge=1000, description="Longest event text sent in one summariser call; longer "
        "buckets are reduced to their essential sentences first.")
    summarizer_max_output_tokens: int = Field(1024, ge=16, le=32_768)
    # Conversations (control_plane/conversations).
    summarize_at: float = Field(
        0.8, gt=0, le=1, description="A conversation needs summarising once the tokens of its "
        "messages not covered by its summary reach this share of its context window limit; a "
        "summarisation job is then queued.")
    conversation_keep_recent: float = Field(
        0.25, ge=0, lt=1, description="Summarising keeps the newest messages whose tokens fit "
        "in this share of the context window limit word for word; older ones go into the "
        "summary.")

    # Embedders (control_plane/embedders): the server's default for semantic search.
    embedder: Literal["hash", "semantic"] = Field(
        "hash", description="The embedder of tenants without an embeddings endpoint of their "
        "own: 'hash' (built in, offline, word overlap only) or 'semantic' (the all-MiniLM-L6-v2 "
        "sentence model of the [semantic] extra, offline on CPU).")
    embedder_max_batch: int = Field(
        64, ge=1, le=2048, description="Most texts sent in one call to a tenant's embeddings "
        "endpoint; larger batches are split.")
    index_yield_ms: float = Field(
        50.0, ge=0, description="The search indexer running inside the server (the embedded "
        "default) waits while this process committed a request's transaction in the last "
        "this many milliseconds, so embedding does not slow acknowledged writes; 0 never "
        "waits. `memplane worker` processes never wait.")
    index_max_lag_seconds: float = Field(
        5.0, gt=0, description="Longest the waiting indexer lets new writes go unindexed: "
        "past it, it catches up (in larger batches) even while writes keep arriving.")
    index_when_idle: bool = Field(
        True, description="Server processes beside a background process's indexer also index "
        "while their requests have been quiet for MEMPLANE_INDEX_YIELD_MS (compaction stays "
        "with the background process; needs PostgreSQL or a SQLite file).")
    otel_telemetry: bool = Field(
        False, description="FastAPI's own OpenTelemetry instrumentation of each request "
        "(spans, request metrics, error logs) for an OpenTelemetry SDK the process configures "
        "(FASTAPI_OTEL_AUTO_CONFIGURE=true and the OTEL_* variables). Off, requests skip it "
        "entirely (it otherwise looks its providers up on every request); memplane's own "
        "metrics are at /metrics either way.")
    blas_threads: int = Field(
        1, ge=0, description="Threads numpy's BLAS may use for one matrix product (a "
        "search's ranking), process-wide: 1 leaves the parallelism to concurrent requests "
        "(a multi-threaded product of a warm search's size spins helper threads that take "
        "cores from requests); 0 keeps the BLAS library's own default (all cores).")

    @model_validator(mode="before")
    @classmethod
    def _secrets_from_files(cls, data: Any) -> Any:
        """MEMPLANE_<NAME>_FILE: the secret read from that file (never both ways)."""
        if not isinstance(data, dict):
            return data
        from .secret_files import FILE_SETTINGS, read_secret_file

        for name in FILE_SETTINGS:
            path = data.get(f"{name}_file")
            if not path:
                continue
            setting = f"MEMPLANE_{name.upper()}"
            if data.get(name):
                raise ValueError(f"set {setting} or {setting}_FILE, not both")
            data = {**data, name: read_secret_file(Path(path), f"{setting}_FILE")}
        return data

    @field_validator("database_url")
    @classmethod
    def _database_url_is_usable(cls, value: str | None) -> str | None:
        from .db.urls import url_problem

        problem = url_problem(value) if value else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("allowed_endpoints", "kek_aws_allowed_key_refs",
                     "gcs_impersonation_allowed", mode="before")
    @classmethod
    def _list_from_text(cls, value: Any) -> Any:
        """A list setting may be a JSON list or comma-separated text."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("allowed_endpoints")
    @classmethod
    def _endpoint_entries(cls, value: list[str]) -> list[str]:
        from storage_adapters.netguard import parse_entries

        parse_entries(value)  # a bad entry is refused at start, naming it
        return value

    @field_validator("gcs_impersonation_allowed")
    @classmethod
    def _impersonation_entries(cls, value: list[str]) -> list[str]:
        from storage_adapters.identity import ImpersonationRules

        ImpersonationRules.from_entries(value)  # a bad entry is refused at start, naming it
        return value

    @field_validator("summarizer_public_hosts", mode="before")
    @classmethod
    def _summarizer_hosts_from_text(cls, value: Any) -> Any:
        return cls._list_from_text(value)

    @field_validator("summarizer_public_hosts")
    @classmethod
    def _summarizer_host_entries(cls, value: list[str]) -> list[str]:
        from storage_adapters.netguard import parse_entries

        _, networks = parse_entries(value)
        if networks:
            raise ValueError("MEMPLANE_SUMMARIZER_PUBLIC_HOSTS takes host patterns only; put "
                             "networks in MEMPLANE_ALLOWED_ENDPOINTS")
        return value

    @field_validator("embedder")
    @classmethod
    def _embedder_installed(cls, value: str) -> str:
        if value == "semantic":
            from .semantic_extra import SemanticUnavailable, check_available

            try:
                check_available()  # refused at start, with the install hint
            except SemanticUnavailable as missing:
                raise ValueError(str(missing)) from None
        return value

    @property
    def embedded(self) -> bool:
        return self.database_url is None or self.database_url.startswith("sqlite")

    @property
    def local_storage_allowed(self) -> bool:
        return self.embedded if self.allow_local_storage is None else self.allow_local_storage

    @property
    def allowed_local_roots(self) -> list[Path]:
        roots = self.local_storage_roots or [self.data_dir / "buckets"]
        return [root.resolve() for root in roots]

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'memplane.db').resolve()}"

    @property
    def resolved_bucket_url(self) -> str:
        if self.default_bucket_url:
            return self.default_bucket_url
        return f"file://{(self.data_dir / 'bucket').resolve()}"

    @property
    def resolved_keyring_path(self) -> Path:
        return (self.kek_keyring_path or self.data_dir / "keyring.json").resolve()

    @property
    def allowed_kms_key_refs(self) -> list[str]:
        return self.kek_aws_allowed_key_refs or (
            [self.kek_aws_key_id] if self.kek_aws_key_id else [])


    @model_validator(mode="after")
    def _tenant_storage_fits_the_threads(self) -> Settings:
        if self.storage_calls_per_tenant + self.storage_waiters_per_tenant > REQUEST_THREADS // 2:
            raise ValueError(
                "MEMPLANE_STORAGE_CALLS_PER_TENANT + MEMPLANE_STORAGE_WAITERS_PER_TENANT must be "
                f"at most {REQUEST_THREADS // 2}, half the server's {REQUEST_THREADS} request "
                "threads, so one tenant's slow bucket cannot take the threads other tenants "
                "need")
        if not self.storage_threads_reserved < self.storage_threads < REQUEST_THREADS:
            raise ValueError(
                "MEMPLANE_STORAGE_THREADS must be below the server's "
                f"{REQUEST_THREADS} request threads, and MEMPLANE_STORAGE_THREADS_RESERVED "
                "below MEMPLANE_STORAGE_THREADS, so slow buckets of several tenants together "
                "leave threads for healthy tenants and for requests that use no bucket")
        return self

    @model_validator(mode="after")
    def _kms_needs_a_key(self) -> Settings:
        if self.kek_provider == "aws-kms" and not self.kek_aws_key_id:
            raise ValueError("MEMPLANE_KEK_AWS_KEY_ID must name the KMS key (id, ARN or alias) "
                             "when MEMPLANE_KEK_PROVIDER is aws-kms")
        return self

    @model_validator(mode="after")
    def _admin_key_is_long(self) -> Settings:
        if self.admin_key is not None and len(self.admin_key.get_secret_value()) < 32:
            raise ValueError(
                "MEMPLANE_ADMIN_KEY must be a random secret of at least 32 characters (for "
                "example: python -c 'import secrets; print(\"mp_\" + secrets.token_urlsafe(32))'"
                "), or unset to have one generated and printed once"
            )
        return self

    @model_validator(mode="after")
    def _refuse_placeholder_secrets(self) -> Settings:
        if self.embedded:
            return self
        key = self.server_key.get_secret_value() if self.server_key else ""
        if key.strip().lower() in _PLACEHOLDERS or random_bytes_in(key) < SERVER_KEY_MIN_BYTES:
            raise ValueError(
                "MEMPLANE_SERVER_KEY must be a generated random key of at least "
                f"{SERVER_KEY_MIN_BYTES} bytes (hex or base64; not a passphrase or a pattern) "
                "when MEMPLANE_DATABASE_URL points at a shared database; generate one with: "
                "python -c 'import secrets; print(secrets.token_hex(32))'"
            )
        return self


# MEMPLANE_* names that are read, but not as server settings: the CLI's options (each
# option's envvar; tests/unit/test_cli_envvars.py holds the list to the CLI), the SDK's, the
# examples', the test suite's.
_CLI_NAMES = frozenset({"MEMPLANE_URL", "MEMPLANE_API_KEY", "MEMPLANE_WORKERS"})
_OTHER_NAMES = _CLI_NAMES | {"MEMPLANE_BUCKET_DIR", "MEMPLANE_HYPOTHESIS_PROFILE"}
_OTHER_PREFIXES = ("MEMPLANE_TEST_", "MEMPLANE_FUZZ_", "MEMPLANE_README_")


def unknown_setting_warnings(environ: dict[str, str]) -> list[str]:
    """One sentence per ``MEMPLANE_*`` variable that names no setting (a misspelling is
    otherwise ignored without a word), with the nearest setting's name. Names only: a value
    is never looked at."""
    import difflib

    from .secret_files import FILE_SETTINGS

    known = {f"MEMPLANE_{name.upper()}" for name in Settings.model_fields}
    known |= {f"MEMPLANE_{name.upper()}_FILE" for name in FILE_SETTINGS}
    known |= _CLI_NAMES
    sentences = []
    for name in sorted(environ):
        upper = name.upper()
        if (not upper.startswith("MEMPLANE_") or upper in known or upper in _OTHER_NAMES
                or upper.startswith(_OTHER_PREFIXES)):
            continue
        # Compared without the shared prefix, which alone would make MEMPLANE_ZZZ "close".
        nearest = difflib.get_close_matches(upper.removeprefix("MEMPLANE_"),
                                            sorted(k.removeprefix("MEMPLANE_") for k in known),
                                            n=1, cutoff=0.75)
        hint = (f"did you mean MEMPLANE_{nearest[0]}?" if nearest
                else "the README's Configuration table lists every setting")
        sentences.append(f"{name} is not a memplane setting and is ignored; {hint}")
    return sentences
