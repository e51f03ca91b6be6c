"""The base install (no extras) serves the embedded default: nothing imports a driver or a
cloud SDK that only an extra brings."""

from __future__ import annotations

import subprocess
import sys

_BLOCK_EXTRAS = (
    "import sys\n"
    "for name in ('psycopg', 'boto3', 'botocore', 'google.cloud.storage', 'azure.storage.blob'):\n"
    "    sys.modules[name] = None  # importing it now raises ImportError\n"
)


def test_server_and_cli_import_without_any_extra() -> None:
    code = _BLOCK_EXTRAS + (
        "import control_plane.app, control_plane.db.direct, control_plane.memories.hotpath\n"
        "import memplane.cli\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def test_the_server_imports_neither_the_http_client_nor_alembic() -> None:
    """``memplane serve`` starts faster without them: the SDK's client and models are
    imported on first use, Alembic by the processes that migrate."""
    code = ("import sys\n"
            "import memplane.cli, control_plane.app\n"
            "print(sorted(m for m in ('memplane._client', 'memplane._async_client',\n"
            "                         'memplane._models', 'alembic') if m in sys.modules))\n"
            "import memplane\n"
            "print(memplane.Client.__module__, memplane.NotFound.__module__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[]", "memplane._client memplane._exceptions"]
