"""Recall@5 of each available embedder on the labelled set (tests/search/labelled):
plain cosine top-5 of every paraphrased query over the 64 memories, no server, no keyword
part — the embedder's own quality. Also the time to embed the set.

    python -m bench.recall            # hash and, when installed, [semantic]
    python -m bench.recall --k 10
"""

from __future__ import annotations

import argparse
import time

from control_plane.embedders import Embedder
from control_plane.embedders.hashing import HashingEmbedder
from tests.search.labelled import load, recall_at


def available() -> list[Embedder]:
    embedders: list[Embedder] = [HashingEmbedder()]
    try:
        from control_plane.embedders.semantic import SemanticEmbedder
        from control_plane.semantic_extra import check_available

        check_available()
        embedders.append(SemanticEmbedder())
    except Exception as missing:  # the extra is not installed
        print(f"[semantic] skipped: {missing}")
    return embedders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()
    data = load()
    texts = [m["text"] for m in data["memories"]] + [q["query"] for q in data["queries"]]
    print(f"labelled set: {len(data['memories'])} memories, {len(data['queries'])} queries")
    print(f"{'embedder':32} {'dim':>5} {'recall@' + str(args.k):>9} {'missed':>7} "
          f"{'ms/text':>8}")
    for embedder in available():
        embedder.embed(texts[:1])  # load the model outside the timing
        started = time.perf_counter()
        embedder.embed(texts)
        per_text = (time.perf_counter() - started) * 1000 / len(texts)
        result = recall_at(embedder, args.k)
        print(f"{embedder.name:32} {embedder.dim:>5} {result.recall:>9.3f} "
              f"{len(result.misses):>7} {per_text:>8.2f}")


if __name__ == "__main__":
    main()
