"""The architecture's contracts: ``lint-imports`` keeps every contract of ``.importlinter`` on
this tree, and memplane's own contract types (scripts/contracts.py) break on what they forbid."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), str(ROOT)]),
               COLUMNS="200", NO_COLOR="1")
    return subprocess.run([str(LINT), "--no-cache", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_tree_keeps_every_contract() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    contracts = [line for line in (ROOT / ".importlinter").read_text().splitlines()
                 if line.startswith("[importlinter:contract:")]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in result.stdout


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


CONFIG = """\
[importlinter]
root_packages =
    shop
contract_types =
    no_circles: scripts.contracts.NoCirclesContract
    private_names: scripts.contracts.PrivateNamesContract

[importlinter:contract:no-circles]
name = circles
type = no_circles

[importlinter:contract:private-names]
name = private names
type = private_names
"""


def test_a_circle_and_another_domains_private_name_break_the_contracts(tmp_path: Path) -> None:
    write_package(tmp_path, {
        ".importlinter": CONFIG,
        "shop/__init__.py": "",
        "shop/orders/__init__.py": "",
        "shop/orders/service.py": "from ..billing.invoices import _total\n",
        "shop/billing/__init__.py": "",
        "shop/billing/invoices.py": "from . import ledger\n\ndef _total(): ...\n",
        "shop/billing/ledger.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from . import invoices\n",
        "shop/billing/tax.py": "from .invoices import _total\n",  # its own domain: allowed
        "shop/_util.py": "def _helper(): ...\n",
        "shop/kit.py": "from ._util import _helper\n",  # a private module's own package
    })
    result = lint(tmp_path)
    assert result.returncode == 1
    out = " ".join(result.stdout.split())
    assert "Contracts: 0 kept, 2 broken." in out
    assert "An import circle of 2 modules: shop.billing.invoices shop.billing.ledger" in out
    assert ("shop.orders.service:1 imports shop.billing.invoices._total, another domain's "
            "private name") in out
    assert "shop.billing.tax" not in out
    assert "shop.kit" not in out


def test_a_tree_without_them_keeps_the_contracts(tmp_path: Path) -> None:
    write_package(tmp_path, {
        ".importlinter": CONFIG,
        "shop/__init__.py": "",
        "shop/orders/__init__.py": "",
        "shop/orders/service.py": "from ..billing.invoices import total\n",
        "shop/billing/__init__.py": "",
        "shop/billing/invoices.py": "from . import ledger\n\ndef total(): ...\n",
        "shop/billing/ledger.py": "VERSION = 1\n",
    })
    result = lint(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "Contracts: 2 kept, 0 broken." in result.stdout
