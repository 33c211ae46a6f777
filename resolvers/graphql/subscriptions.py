"""The Subscription root: changes to memory as they are committed (graphql-transport-ws)."""

from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Annotated

import strawberry
from strawberry.types import Info

from ..context import Context
from .types import ChangeKind, DateTime, MemoryChange


@strawberry.type(description="Live updates.")
class Subscription:
    @strawberry.subscription(
        description="Every change committed in this namespace from now on: facts stored, "
        "superseded, forgotten or purged, links made or removed. Each event spends the "
        "document's cost from the API key's points per minute, and a key's events are "
        "delivered at most `subscription_events_per_second` a second. Ends with FORBIDDEN at "
        "the first change after the caller's API key is revoked, RATE_LIMITED when its points "
        "run out, or UNAVAILABLE when it falls too far behind (a socket that does not read is "
        "then closed)."
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
        context = info.context
        key_id = None if context.key is None else context.key.id
        changes = context.broadcaster.changes(
            context.memory.namespace, key=key_id, on_end=context.close_socket
        )
        async for change in changes:
            if wanted is None or change.kind in wanted:
                await context.pace_event()  # the key's events per second
                await context.require_live_key()  # a revoked key hears nothing more
                context.charge_event()
                context.forget_reads()  # the event shows the facts as they are now
                yield MemoryChange(
                    kind=ChangeKind(change.kind),
                    id=strawberry.ID(change.id),
                    at=DateTime(datetime.fromtimestamp(change.at, UTC)),
                )
