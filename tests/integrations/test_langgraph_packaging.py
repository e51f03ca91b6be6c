"""The LangGraph integration costs nothing unless used: importing memplane, or the
integration package itself, imports nothing of LangGraph; without the ``[langgraph]`` extra
the classes raise an ImportError naming the install command."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_importing_memplane_and_the_integration_imports_no_langgraph() -> None:
    done = _run("""
        import sys
        import memplane
        import memplane.integrations.langgraph as lg
        loaded = sorted(m for m in sys.modules
                        if m.split(".")[0] in ("langgraph", "langchain_core"))
        assert loaded == [], loaded
        assert lg.__all__ == ["MemplaneCheckpointer", "MemplaneStore"]
        lg.MemplaneStore  # first use loads LangGraph
        assert "langgraph.store.base" in sys.modules
        print("ok")
    """)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "ok", "")


def test_without_the_extra_the_classes_say_how_to_install_it() -> None:
    done = _run("""
        import importlib.abc, sys

        class NoLangGraph(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "langgraph":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoLangGraph())
        import memplane.integrations.langgraph as lg
        for name in ("MemplaneStore", "MemplaneCheckpointer"):
            try:
                getattr(lg, name)
            except ImportError as exc:
                print(exc)
        try:
            lg.Nothing
        except AttributeError as exc:
            print(exc)
    """)
    hint = ("memplane's LangGraph integration needs langgraph-checkpoint: "
            "pip install 'memplane[langgraph]'")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        hint, hint, "module 'memplane.integrations.langgraph' has no attribute 'Nothing'"]
