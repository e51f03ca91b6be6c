"""How many threads numpy's BLAS may use for one matrix product (MEMPLANE_BLAS_THREADS).

A warm search's matrix product is small (10,000 × 512 is about a millisecond of one core),
and a server runs many requests side by side. OpenBLAS splits such a product over every core
by default; its extra threads then wait in a spin loop between products, taking a core from
the request threads (the search's own SQL, the audit commit), and on a busy machine the
product itself waits until each helper thread is scheduled again. Measured on a 2-core
machine under load: the product of a warm search took 10–34 ms with two threads and 1–1.4 ms
with one (docs/performance/warm-search.md). One thread per product, parallelism from the
requests, is the usual setting for a server.

numpy exposes no call for it; threadpoolctl finds the BLAS library numpy loaded (OpenBLAS,
MKL, BLIS) and sets its thread count for the whole process.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)
_lock = threading.Lock()


def limit_threads(threads: int) -> bool:
    """Let each BLAS call use at most ``threads`` threads (0: leave the library's own
    choice); True if a BLAS library took the setting. Process-wide."""
    if threads <= 0:
        return False
    import numpy  # noqa: F401  (loads the BLAS library being limited)
    from threadpoolctl import threadpool_limits

    with _lock:
        limited = threadpool_limits(limits=threads, user_api="blas")
    if not limited.get_original_num_threads():
        log.info("no BLAS library with a thread setting was found; "
                 "MEMPLANE_BLAS_THREADS has no effect")
        return False
    return True


def current_threads() -> int | None:
    """The thread count numpy's BLAS uses now (None: no BLAS library found here)."""
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_info

    counts = [int(lib["num_threads"]) for lib in threadpool_info()
              if lib.get("user_api") == "blas"]
    return min(counts) if counts else None
