"""How many threads numpy's BLAS may use for one matrix product (MEMPLANE_BLAS_THREADS).

A warm search's matrix product is small (10,000 × 512 is about a millisecond of one core),
and a server runs many requests side by side. OpenBLAS splits such a product over every core
by default; its extra threads then wait in a spin loop between products, taking a core from
the request threads (the search's own SQL, the audit commit), and on a busy machine the
product itself waits until each helper thread is scheduled again. Measured on a 2-core
machine under load: the product of a warm search took 10–34 ms with two threads and 1–1.4 ms
with one (docs/performance.md, "Warm search"). One thread per product, parallelism from the
requests, is the usual setting for a server.

numpy exposes no call for it: the BLAS library numpy loaded is found among the process's
shared objects and its own ``set_num_threads`` is called. Where none is found (another BLAS,
another platform) nothing is changed, and the log says so.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from pathlib import Path

log = logging.getLogger(__name__)

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads", "MKL_Set_Num_Threads")
_lock = threading.Lock()


def _loaded_blas() -> list[str]:
    """Paths of the BLAS libraries this process has loaded (Linux: /proc/self/maps)."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return []
    found: dict[str, None] = {}
    for line in maps.read_text().splitlines():
        fields = line.split(maxsplit=5)  # address perms offset device inode [path]
        path = fields[5] if len(fields) == 6 else ""
        name = path.rsplit("/", 1)[-1].lower()
        if path.startswith("/") and ("openblas" in name or name.startswith("libmkl_rt")):
            found[path] = None
    return list(found)


def limit_threads(threads: int) -> bool:
    """Let each BLAS call use at most ``threads`` threads (0: leave the library's own
    choice); True if a BLAS library took the setting. Process-wide."""
    if threads <= 0:
        return False
    import numpy  # noqa: F401  (loads the BLAS library being limited)

    with _lock:
        for path in _loaded_blas():
            try:
                library = ctypes.CDLL(path)  # already loaded: the same handle numpy uses
            except OSError:
                continue
            for symbol in _SETTERS:
                setter = getattr(library, symbol, None)
                if setter is not None:
                    setter.argtypes = [ctypes.c_int]
                    setter.restype = None
                    setter(threads)
                    return True
        log.info("no BLAS library with a thread setting was found; "
                 "MEMPLANE_BLAS_THREADS has no effect")
        return False


def current_threads() -> int | None:
    """The thread count numpy's OpenBLAS uses now (None: not an OpenBLAS found here)."""
    for path in _loaded_blas():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                       "openblas_get_num_threads64_", "openblas_get_num_threads"):
            getter = getattr(library, symbol, None)
            if getter is not None:
                getter.restype = ctypes.c_int
                return int(getter())
    return None
