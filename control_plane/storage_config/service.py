"""Bring your own bucket: configure, show and check a tenant's storage.

Configure — validate the credentials before anything is saved:
  1. split the connection settings into public ones and secrets;
  2. build the adapter (rooted at ``<prefix or "memplane">/<tenant id>``) and run its
     write/read/delete probe; a failure answers 422 naming what failed, and nothing is saved;
  3. one transaction: retire the active row, insert a new one (secrets sealed with the
     server key; region, versioning, soft delete and object lock as the bucket reported
     them), audit; commit; forget the cached active configuration.

What a tenant is told about a failed probe is only a generic problem code (``unreachable``,
``auth_failed``, ``bucket_not_found``, ``permission_denied``, ``endpoint_not_allowed``) and a
fixed sentence — in the answer, the health report and the audit row alike — never what the
remote answered; the detail goes to the server log at debug level.

Rows are never rewritten, so pointers written under an older configuration keep reading from
where they were written. No transaction is open while the bucket is probed.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any, NoReturn

from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.identity import IdentityRefused
from storage_adapters.registry import MissingExtra, UnknownBackend

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import StorageConfig
from ..errors import InvalidInput, NotFound, StorageMisconfigured
from ..identity import Actor
from ..plane.credentials import CredentialBox, CredentialsUnreadable, associated_data
from ..plane.data_plane import (
    DataPlane,
    Target,
    build_adapter,
    object_prefix,
    parse_public_id,
    public_id,
)
from . import repository as repo
from .schemas import StorageConfigIn, StorageConfigOut, StorageHealthOut

log = logging.getLogger(__name__)


def _check_local_root(root: Path, allowed: list[Path]) -> None:
    """A tenant's local bucket must sit inside a directory the operator set aside for them."""
    resolved = root.resolve()
    if not any(resolved == base or base in resolved.parents for base in allowed):
        where = ", ".join(str(base) for base in allowed) or "(none configured)"
        raise InvalidInput(f"a local bucket must be inside one of: {where} "
                           "(an operator sets MEMPLANE_LOCAL_STORAGE_ROOTS)")


def configure(session: Session, plane: DataPlane, actor: Actor, body: StorageConfigIn, *,
              allow_local: bool, local_roots: list[Path]) -> StorageConfigOut:
    """Validate the bucket and make it the tenant's active storage."""
    with audited(session, actor, "storage_configure",
                 detail=f"storage_type={body.storage_type}"):
        session.commit()  # no transaction may stay open across bucket I/O
        config, secrets = validated_row(plane, actor, body, allow_local=allow_local,
                                        local_roots=local_roots)
        begin_write(session)
        repo.replace_active(session, actor.tenant_id, config)
        audit.record(session, actor, "storage_configure",
                     detail=configured_detail(config, secrets))
        session.commit()
    plane.forget_tenant(actor.tenant_id)
    return _out(config, sorted(secrets))


def validated_row(plane: DataPlane, actor: Actor, body: StorageConfigIn, *, allow_local: bool,
                  local_roots: list[Path]) -> tuple[StorageConfig, dict[str, str]]:
    """Probe the bucket (no transaction open) and check its region; the unsaved row and the
    secrets it seals. Nothing is saved when a check fails."""
    connection = body.connection_config
    if body.storage_type == "local" and not allow_local:
        raise InvalidInput(
            "storage_type 'local' is not allowed on this server; configure s3, gcs or "
            "azure (an operator may allow it with MEMPLANE_ALLOW_LOCAL_STORAGE=true)")
    if body.storage_type == "local":
        _check_local_root(Path(str(connection.bucket_name)), local_roots)
    box = _box(plane)
    prefix = object_prefix(connection.prefix, actor.tenant_id)
    public, secrets = connection.public(), connection.secrets()
    description = _probe(plane, body.storage_type, public, secrets, prefix, actor.tenant_id)
    check_residency(connection.region_name, description.region)
    config_id = new_id()
    config = StorageConfig(
        id=config_id, tenant_id=actor.tenant_id, storage_type=body.storage_type,
        bucket=connection.bucket_name, prefix=prefix,
        region=description.region or connection.region_name,
        endpoint=connection.endpoint_name, connection_config=public,
        credentials_encrypted=(box.seal(secrets, aad=associated_data(actor.tenant_id,
                                                                     config_id))
                               if secrets else None),
        versioning=description.versioning, soft_delete_days=description.soft_delete_days,
        object_lock=description.object_lock, created_at=utcnow(),
    )
    return config, secrets


def configured_detail(config: StorageConfig, secrets: dict[str, str]) -> str:
    return (f"config {config.id}: storage_type={config.storage_type} "
            f"bucket={config.bucket} prefix={config.prefix} region={config.region} "
            f"versioning={config.versioning} "
            f"secrets={','.join(sorted(secrets)) or 'none'}")


# S3's legacy LocationConstraint values and the regions they mean.
_LEGACY_S3_LOCATIONS = {"eu": "eu-west-1"}


def same_region(declared: str, reported: str) -> bool:
    """Regions compare case-insensitively (GCS reports ``EUROPE-WEST1``)."""
    def norm(region: str) -> str:
        folded = region.strip().casefold()
        return _LEGACY_S3_LOCATIONS.get(folded, folded)

    return norm(declared) == norm(reported)


def check_residency(declared: str | None, reported: str | None) -> None:
    """Refuse a bucket whose own location is not the declared region (data residency)."""
    if declared and reported and not same_region(declared, reported):
        raise InvalidInput(
            f"the bucket is in region {reported!r} but the configuration declares region "
            f"{declared!r}; nothing was saved — declare the bucket's real region, or choose a "
            f"bucket in {declared!r}", problem="region_mismatch", declared_region=declared,
            bucket_region=reported)


def get_active(session: Session, plane: DataPlane, actor: Actor) -> StorageConfigOut:
    """The tenant's active configuration, without its secrets."""
    config = repo.active(session, actor.tenant_id)
    if config is None:
        raise StorageMisconfigured("the tenant has no storage configuration")
    names = _secret_names(plane, config)
    session.commit()
    begin_write(session)
    audit.record(session, actor, "storage_config_read", detail=f"config {config.id}")
    session.commit()
    return _out(config, names)


def check_health(session: Session, plane: DataPlane, actor: Actor,
                 storage_config_id: str | None = None) -> StorageHealthOut:
    """Probe the active bucket (or the configuration ``sc_…``): write, read and delete an
    object; report what it keeps and whether its region is as declared."""
    with audited(session, actor, "storage_health"):
        if storage_config_id is None:
            config = repo.active(session, actor.tenant_id)
            if config is None:
                raise StorageMisconfigured("the tenant has no storage configuration")
        else:
            config_id = parse_public_id(storage_config_id)
            config = repo.get_listed(session, actor.tenant_id, config_id)
            if config is None:
                raise NotFound(f"no storage configuration {public_id(config_id)}")
        try:
            target: Target | None = plane.by_id(session, config.id)
        except StorageMisconfigured as exc:
            if exc.extra.get("problem") != "endpoint_not_allowed":
                raise
            target = None  # the operator has since narrowed MEMPLANE_ALLOWED_ENDPOINTS
        session.commit()
        report = (target.adapter.health_check() if target is not None else storage.HealthReport(
            ok=False, latency_ms=0.0, detail="endpoint no longer allowed",
            problem="endpoint_not_allowed"))
        failure = None if report.ok else (report.problem or "unreachable")
        if failure is not None:
            log.debug("storage health probe of config %s failed: %s", config.id, report.detail)
        described = report.description
        notes = list(described.notes) if described else []
        if described is not None and config.storage_type != "default":
            notes += _drift(config, described)
        result = StorageHealthOut(
            ok=report.ok, reachable=failure not in ("unreachable", "endpoint_not_allowed"),
            probe=report.detail if failure is None else _SENTENCES[failure].split(":")[0],
            problem=failure,
            latency_ms=round(report.latency_ms, 2), config_id=config.id,
            storage_type=config.storage_type, bucket=config.bucket, prefix=config.prefix,
            region=(described.region if described else None) or config.region,
            versioning=described.versioning if described else config.versioning,
            soft_delete_days=(described.soft_delete_days if described
                              else config.soft_delete_days),
            object_lock=described.object_lock if described else config.object_lock,
            retention_days=described.retention_days if described else None,
            notes=notes, checked_at=utcnow(), storage_config_id=public_id(config.id),
            declared_region=declared_region(config),
            region_verified=_region_verified(config, described),
        )
        begin_write(session)
        audit.record(session, actor, "storage_health", success=report.ok,
                     detail=f"config {config.id}: ok={report.ok} "
                            f"latency_ms={report.latency_ms:.1f}"
                            + ("" if report.ok else f" failure={failure}"))
        session.commit()
        return result


def _box(plane: DataPlane) -> CredentialBox:
    if plane.credentials is None:
        raise StorageMisconfigured("the server has no key to encrypt bucket credentials")
    return plane.credentials


_SENTENCES = {
    "unreachable": "the storage endpoint could not be reached, or did not answer as a bucket",
    "auth_failed": "the bucket rejected the credentials",
    "permission_denied": "the credentials may not write, read and delete objects in the "
                         "bucket",
    "bucket_not_found": "the bucket or container does not exist",
    "endpoint_not_allowed": "the storage endpoint is not allowed on this server: use the "
                            "cloud's own endpoint, or one the operator lists in "
                            "MEMPLANE_ALLOWED_ENDPOINTS (loopback, private, link-local and "
                            "metadata addresses are refused)",
}


def _probe(plane: DataPlane, storage_type: str, public: dict[str, Any],
           secrets: dict[str, str], prefix: str,
           tenant_id: uuid.UUID) -> storage.BucketDescription:
    """Build the adapter and run its health probe; a failure is a generic problem code."""
    try:
        adapter = build_adapter(storage_type, public, secrets, prefix, tenant_id=tenant_id,
                                endpoint_policy=plane.endpoint_policy,
                                call_deadline=plane.call_deadline,
                                impersonation=plane.impersonation)
    except (MissingExtra, UnknownBackend) as exc:
        raise InvalidInput(str(exc), problem="backend_unavailable") from None
    except IdentityRefused as exc:
        raise InvalidInput(f"{exc}; nothing was saved",
                           problem="impersonation_not_allowed") from None
    except storage.StorageError as exc:
        _refuse(storage.problem_code(exc), _redact(f"{type(exc).__name__}: {exc}", secrets))
    except (ValueError, OSError) as exc:
        raise InvalidInput(
            f"the {storage_type} connection settings are not usable: "
            f"{_redact(f'{type(exc).__name__}: {exc}', secrets)}",
            problem="invalid_settings") from None
    try:
        # inside the tenant's bulkhead, like every call to its buckets
        report = plane.guarded(tenant_id, adapter).health_check()
    finally:
        adapter.close()
    if report.ok and report.description is not None:
        return report.description
    _refuse(report.problem or "unreachable", _redact(report.detail, secrets))


def _refuse(problem: str, detail: str) -> NoReturn:
    log.debug("storage probe failed (%s): %s", problem, detail)
    raise InvalidInput(f"{_SENTENCES[problem]} ({problem}); nothing was saved — fix the "
                       "connection_config and retry", problem=problem)


def _redact(text: str, secrets: dict[str, str]) -> str:
    for value in secrets.values():
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def declared_region(config: StorageConfig) -> str | None:
    region = (config.connection_config or {}).get("region")
    return str(region) if region else None


def _region_verified(config: StorageConfig,
                     described: storage.BucketDescription | None) -> bool:
    if described is None or not described.region:
        return False
    declared = declared_region(config)
    return declared is None or same_region(declared, described.region)


def _drift(config: StorageConfig, described: storage.BucketDescription) -> list[str]:
    notes = []
    declared = declared_region(config)
    if declared and described.region and not same_region(declared, described.region):
        notes.append(f"the bucket now reports region {described.region!r} but the "
                     f"configuration declares {declared!r}: data residency is not as "
                     "configured")
    elif declared and not described.region:
        notes.append(f"region {declared!r} is declared; the {config.storage_type} data plane "
                     "does not report the bucket's region, so it is not verified")
    if bool(config.versioning) != described.versioning:
        notes.append(f"versioning is now {'on' if described.versioning else 'off'} but was "
                     f"{'on' if config.versioning else 'off'} when configured; configure the "
                     f"storage again so deletes purge old versions")
    if bool(config.object_lock) != described.object_lock:
        notes.append("the bucket's object lock changed since it was configured")
    return notes


def _secret_names(plane: DataPlane, config: StorageConfig) -> list[str]:
    if config.credentials_encrypted is None:
        return []
    box = _box(plane)
    try:
        values = box.open(config.credentials_encrypted,
                          aad=associated_data(config.tenant_id, config.id))
    except CredentialsUnreadable:
        raise StorageMisconfigured(
            "the stored bucket credentials do not decrypt with this server's key; restore "
            "the server key or configure the storage again") from None
    return sorted(values)


def _out(config: StorageConfig, secret_names: list[str]) -> StorageConfigOut:
    return StorageConfigOut(
        id=config.id, storage_type=config.storage_type, bucket=config.bucket,
        prefix=config.prefix, region=config.region, endpoint=config.endpoint,
        connection_config=dict(config.connection_config), secrets_set=secret_names,
        versioning=config.versioning, soft_delete_days=config.soft_delete_days,
        object_lock=config.object_lock, is_active=config.is_active,
        created_at=config.created_at, storage_config_id=public_id(config.id),
        name=config.name, is_default=config.is_active,
        declared_region=declared_region(config),
        region_verified=(config.storage_type in ("s3", "gcs") and config.region is not None),
    )
