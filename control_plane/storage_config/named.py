"""Several storage configurations per tenant: create, list, show, rename, delete and choose
the default (``/v1/storage/configs``).

A configuration is addressed by its public id ``sc_<hex>``. The default is the row the
single-configuration routes (``/v1/storage/config``) show and replace, and where new content
goes unless an agent's user memory names another (control_plane/agents). Creating one probes
the bucket and checks its region exactly as ``PUT /v1/storage/config`` does (service.py);
the bucket, prefix and credentials of a row never change in place, because pointers and
events name the row they were written under. Deleting one is refused while anything lives in
it or an agent routes to it; a deleted row is retired, not removed, so audit rows and jobs
that name it stay meaningful.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import StorageConfig
from ..errors import Conflict, NotFound
from ..idempotency import Idempotency, Replay, remember
from ..idempotency import find as find_replay
from ..identity import Actor
from ..plane.data_plane import DataPlane, parse_public_id, public_id
from . import repository as repo
from .schemas import NamedStorageConfigIn, StorageConfigOut, StorageConfigPage, StorageConfigRename
from .service import _out, _secret_names, configured_detail, validated_row


def create(session: Session, plane: DataPlane, actor: Actor, body: NamedStorageConfigIn, *,
           allow_local: bool, local_roots: list[Path],
           idem: Idempotency | None = None) -> StorageConfigOut | Replay:
    """Probe the bucket, then save it as a named configuration (the default if asked)."""
    with audited(session, actor, "storage_config_create",
                 detail=f"storage_type={body.storage_type}"):
        if idem is not None:
            replay = find_replay(session, actor, idem)
            if replay is not None:
                session.rollback()
                begin_write(session)
                audit.record(session, actor, "replay",
                             detail="idempotency key answered from the first request")
                session.commit()
                return replay
        _refuse_taken_name(session, actor, body.name)
        session.commit()  # no transaction may stay open across bucket I/O
        config, secrets = validated_row(plane, actor, body, allow_local=allow_local,
                                        local_roots=local_roots)
        config.name = body.name
        begin_write(session)
        repo.lock_tenant(session, actor.tenant_id)
        _refuse_taken_name(session, actor, body.name)  # a twin may have taken it meanwhile
        if body.make_default:
            repo.replace_active(session, actor.tenant_id, config)
        else:
            config.is_active = False
            session.add(config)
            session.flush()
        audit.record(session, actor, "storage_config_create",
                     detail=f"{configured_detail(config, secrets)} "
                            f"default={config.is_active}")
        answer = _out(config, sorted(secrets))
        if idem is not None:
            remember(session, actor, idem, 201, answer.model_dump(mode="json"))
        session.commit()
    plane.forget_tenant(actor.tenant_id)
    return answer


def list_configs(session: Session, plane: DataPlane, actor: Actor) -> StorageConfigPage:
    with audited(session, actor, "storage_config_read", detail="list"):
        rows = repo.listed(session, actor.tenant_id)
        items = [_out(row, _secret_names(plane, row)) for row in rows]
        session.commit()
        begin_write(session)
        audit.record(session, actor, "storage_config_read",
                     detail=f"list: {len(items)} configuration(s)")
        session.commit()
        return StorageConfigPage(items=items, next_cursor=None)


def get_config(session: Session, plane: DataPlane, actor: Actor,
               storage_config_id: str) -> StorageConfigOut:
    with audited(session, actor, "storage_config_read", detail=storage_config_id[:40]):
        config = _find(session, actor, storage_config_id)
        answer = _out(config, _secret_names(plane, config))
        session.commit()
        begin_write(session)
        audit.record(session, actor, "storage_config_read", detail=f"config {config.id}")
        session.commit()
        return answer


def rename(session: Session, plane: DataPlane, actor: Actor, storage_config_id: str,
           body: StorageConfigRename) -> StorageConfigOut:
    with audited(session, actor, "storage_config_update", detail=storage_config_id[:40]):
        config_id = parse_public_id(storage_config_id)
        begin_write(session)
        repo.lock_tenant(session, actor.tenant_id)
        config = _find(session, actor, storage_config_id, lock=True)
        if repo.name_taken(session, actor.tenant_id, body.name, other_than=config_id):
            raise Conflict(f"another storage configuration is already named {body.name!r}; "
                           "choose another name", problem="name_taken")
        config.name = body.name
        session.flush()
        audit.record(session, actor, "storage_config_update",
                     detail=f"config {config.id}: renamed")
        answer = _out(config, _secret_names(plane, config))
        session.commit()
        return answer


def make_default(session: Session, plane: DataPlane, actor: Actor,
                 storage_config_id: str) -> StorageConfigOut:
    """New content of the tenant goes to this configuration from now on."""
    with audited(session, actor, "storage_config_default", detail=storage_config_id[:40]):
        parse_public_id(storage_config_id)
        begin_write(session)
        repo.lock_tenant(session, actor.tenant_id)
        config = _find(session, actor, storage_config_id, lock=True)
        if not config.is_active:  # only named rows are listed without being the default
            repo.make_default(session, actor.tenant_id, config, utcnow())
        audit.record(session, actor, "storage_config_default",
                     detail=f"config {config.id} is the default")
        answer = _out(config, _secret_names(plane, config))
        session.commit()
    plane.forget_tenant(actor.tenant_id)
    return answer


def delete(session: Session, plane: DataPlane, actor: Actor, storage_config_id: str) -> None:
    """Retire a configuration nothing lives in and no agent routes to."""
    with audited(session, actor, "storage_config_delete", detail=storage_config_id[:40]):
        parse_public_id(storage_config_id)
        begin_write(session)
        repo.lock_tenant(session, actor.tenant_id)
        config = _find(session, actor, storage_config_id, lock=True)
        if config.is_active:
            raise Conflict("this is the tenant's default storage configuration; make another "
                           "one the default first (POST /v1/storage/configs/{id}/default)",
                           problem="is_default")
        pointers, events = repo.contents(session, actor.tenant_id, config.id)
        if pointers or events:
            raise Conflict(
                f"{pointers} memor{'y' if pointers == 1 else 'ies'} and {events} "
                f"event{'' if events == 1 else 's'} still live in this storage configuration; "
                "delete or erase them first (they stay readable where they are)",
                problem="config_in_use", pointers=pointers, events=events)
        agents = repo.agents_routed_to(session, actor.tenant_id, config.id)
        if agents:
            raise Conflict(
                f"{len(agents)} agent(s) send their user memories to this storage "
                f"configuration ({', '.join(agents[:5])}); point them elsewhere first "
                "(PUT /v1/agents/{agent_id})", problem="config_in_use")
        config.retired_at = utcnow()
        session.flush()
        audit.record(session, actor, "storage_config_delete", detail=f"config {config.id}")
        session.commit()


def _find(session: Session, actor: Actor, storage_config_id: str, *,
          lock: bool = False) -> StorageConfig:
    config_id = parse_public_id(storage_config_id)
    config = repo.get_listed(session, actor.tenant_id, config_id, lock=lock)
    if config is None:
        raise NotFound(f"no storage configuration {public_id(config_id)}")
    return config


def _refuse_taken_name(session: Session, actor: Actor, name: str) -> None:
    if repo.name_taken(session, actor.tenant_id, name):
        raise Conflict(f"a storage configuration is already named {name!r}; choose another "
                       "name", problem="name_taken")
