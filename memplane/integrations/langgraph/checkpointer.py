"""LangGraph thread state (checkpoints and pending writes) as memories in the tenant's bucket.

Where and how it is stored: ``_checkpoint_layout``; what each method sends, written once
for the sync and async methods: ``_checkpoint_steps``; here, the checkpointer that runs those
steps with a ``memplane.Client`` or ``memplane.AsyncClient``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..._async_client import AsyncClient
from ..._client import Client
from . import _wire
from ._checkpoint_steps import CheckpointSteps
from ._wire import Step

__all__ = ["MemplaneCheckpointer"]


class MemplaneCheckpointer(CheckpointSteps):
    """A LangGraph checkpointer over the memplane SDK.

    Give ``client`` (a ``memplane.Client``) for the sync methods, ``aclient`` (a
    ``memplane.AsyncClient``) for the async ones, or both; the caller owns and closes them.
    ``user_id`` is the data subject when a config carries no ``configurable.user_id``;
    ``ttl_days`` makes every checkpoint and write expire that many days after it is written.
    The key needs the agent or admin role (a scoped agent key needs the ``conversation``
    scope).
    """

    def __init__(self, client: Client | None = None, *, aclient: AsyncClient | None = None,
                 user_id: str | None = None, ttl_days: int | None = None,
                 serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        if client is None and aclient is None:
            raise ValueError("give a memplane.Client (client=) or a memplane.AsyncClient "
                             "(aclient=), or both")
        self.client = client
        self.aclient = aclient
        self.user_id = user_id
        self.ttl_days = ttl_days

    # -- drivers --------------------------------------------------------------------------

    def _run(self, step: Step[Any]) -> Any:
        if self.client is None:
            step.close()
            raise RuntimeError("this MemplaneCheckpointer has no memplane.Client for sync "
                               "calls; pass client= or use the async methods (a...)")
        return _wire.run_sync(self.client._send, step)

    async def _arun(self, step: Step[Any]) -> Any:
        if self.aclient is None:
            step.close()
            raise RuntimeError("this MemplaneCheckpointer has no memplane.AsyncClient for "
                               "async calls; pass aclient= or use the sync methods")
        return await _wire.run_async(self.aclient._send, step)

    # -- BaseCheckpointSaver ----------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (the newest of its thread and namespace when
        it names none), with its pending writes; None if there is none."""
        result: CheckpointTuple | None = self._run(self._get_tuple(config))
        return result

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        result: CheckpointTuple | None = await self._arun(self._get_tuple(config))
        return result

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None,
             ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by checkpoint id), of the config's thread (all threads
        when ``config`` is None) and namespace (all when it names none), whose metadata
        matches every key of ``filter``, older than ``before``, at most ``limit``."""
        for step in self._list(config, filter, before, limit):
            yield from self._run(step)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None,
                    ) -> AsyncIterator[CheckpointTuple]:
        for step in self._list(config, filter, before, limit):
            for tup in await self._arun(step):
                yield tup

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Store the checkpoint (one request); returns the config naming it."""
        result: RunnableConfig = self._run(self._put(config, checkpoint, metadata))
        return result

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions,
                   ) -> RunnableConfig:
        result: RunnableConfig = await self._arun(self._put(config, checkpoint, metadata))
        return result

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Store a task's writes against the config's checkpoint (one request)."""
        self._run(self._put_writes(config, writes, task_id, task_path))

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        await self._arun(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of the thread (other memories of the
        conversation stay)."""
        self._run(self._delete_thread(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(self._delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose metadata names one of ``run_ids``, with their
        writes, in every thread."""
        self._run(self._delete_for_runs(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(self._delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another (same subject)."""
        self._run(self._copy_thread(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(self._copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest`` keeps each namespace's newest checkpoint and its writes;
        ``delete`` removes all. Not aware of ``DeltaChannel`` ancestors (see LangGraph's
        note on ``prune``)."""
        self._run(self._prune(thread_ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._arun(self._prune(thread_ids, strategy))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as InMemorySaver makes them: a zero-padded counter and a random part,
        so they sort as strings."""
        import random

        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"
