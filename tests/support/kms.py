"""AWS KMS on moto for the KEK tests: a client, and settings whose KEK provider is it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3

from control_plane.settings import Settings

from .emulators import MOTO_KEY_ID, MOTO_REGION, MOTO_SECRET, MotoServer
from .service import make_settings


def kms_client(moto: MotoServer) -> Any:
    return boto3.client("kms", endpoint_url=moto.endpoint, region_name=MOTO_REGION,
                        aws_access_key_id=MOTO_KEY_ID, aws_secret_access_key=MOTO_SECRET)


def new_kms_key(moto: MotoServer, description: str) -> str:
    """A new KMS key's ARN."""
    return str(kms_client(moto).create_key(Description=description)["KeyMetadata"]["Arn"])


def kms_settings(database: str, data_dir: Path, moto: MotoServer, key_id: str,
                 allowed: list[str], **overrides: Any) -> Settings:
    """Settings wrapping subject keys under ``key_id`` on moto's KMS; tenants may move to
    the keys in ``allowed``."""
    return make_settings(database, data_dir, kek_provider="aws-kms", kek_aws_key_id=key_id,
                         kek_aws_region=MOTO_REGION, kek_aws_endpoint_url=moto.endpoint,
                         kek_aws_access_key_id=MOTO_KEY_ID,
                         kek_aws_secret_access_key=MOTO_SECRET,
                         kek_aws_allowed_key_refs=allowed, **overrides)
