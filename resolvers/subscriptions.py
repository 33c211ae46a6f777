"""The Subscription root: changes to memory as they are committed (graphql-transport-ws)."""

from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Annotated

import strawberry
from strawberry.types import Info

from .context import Context
from .types import ChangeKind, DateTime, MemoryChange


@strawberry.type(description="Live updates.")
class Subscription:
    @strawberry.subscription(
        description="Every change committed in this namespace from now on: facts stored, "
        "superseded, forgotten or purged, links made or removed. Each event spends the "
        "document's cost from the API key's points per minute. Ends with FORBIDDEN at the "
        "first change after the caller's API key is revoked, or RATE_LIMITED when its points "
        "run out."
    )
    async def memory_changed(
        self,
        info: Info[Context, None],
        kinds: Annotated[
            list[ChangeKind] | None,
            strawberry.argument(description="Only these kinds of change (default: all)."),
        ] = None,
    ) -> AsyncGenerator[MemoryChange, None]:
        wanted = None if kinds is None else {k.name for k in kinds}
        async for change in info.context.broadcaster.changes(info.context.memory.namespace):
            if wanted is None or change.kind in wanted:
                await info.context.require_live_key()  # a revoked key hears nothing more
                info.context.charge_event()
                info.context.forget_reads()  # the event shows the facts as they are now
                yield MemoryChange(
                    kind=ChangeKind(change.kind),
                    id=strawberry.ID(change.id),
                    at=DateTime(datetime.fromtimestamp(change.at, UTC)),
                )
