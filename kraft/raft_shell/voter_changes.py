"""KIP-853 AddRaftVoter / RemoveRaftVoter on the controller: the Raft leader appends the
VotersRecord (`kraft.raft.voters`) and answers once it commits.

Kafka answers these on the active controller after the change commits; kraft does the same,
and answers a follower's call with NOT_CONTROLLER so the client follows the leader hint. The
retriable refusals (the new node has not caught up as an observer yet, another change is not
committed, a new leader has not committed in its epoch) are REQUEST_TIMED_OUT, as in Kafka:
`ControllerClient.add_raft_voter` retries them within its timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from kraft.raft.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
)
from kraft.raft_shell.server import RaftServer
from kraft.transport.channels import parse_bootstrap_servers
from storage.errors import ErrorCode, KraftError, NotControllerError

COMMIT_WAIT_S: Final = 10.0
"""How long a change may take to commit before the call answers REQUEST_TIMED_OUT (the
record stays in the log and commits or is truncated later; `describe` tells which)."""


async def add_raft_voter(
    raft: RaftServer,
    request: AddRaftVoterRequest,
    on_appended: Callable[[int], None] = lambda _log_end: None,
) -> AddRaftVoterResponse:
    try:
        (endpoint,) = parse_bootstrap_servers(request.endpoint, "--controller-address")
    except (KraftError, ValueError):
        return AddRaftVoterResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"bad controller address {request.endpoint[:100]!r}: want HOST:PORT",
        )
    code, message = await _change(
        raft,
        lambda: raft.driver.add_voter(request.voter_id, endpoint),
        request.voter_id,
        on_appended,
    )
    return AddRaftVoterResponse(error_code=code, error_message=message)


async def remove_raft_voter(
    raft: RaftServer,
    request: RemoveRaftVoterRequest,
    on_appended: Callable[[int], None] = lambda _log_end: None,
) -> RemoveRaftVoterResponse:
    code, message = await _change(
        raft, lambda: raft.driver.remove_voter(request.voter_id), request.voter_id, on_appended
    )
    return RemoveRaftVoterResponse(error_code=code, error_message=message)


async def _change(
    raft: RaftServer,
    start: Callable[[], asyncio.Future[int]],
    voter_id: int,
    on_appended: Callable[[int], None],
) -> tuple[ErrorCode, str]:
    """``on_appended(log end offset)`` runs right after the record is appended, before any
    await: the controller's core counts the offset the control batch took (`skip_to`)."""
    if not raft.dynamic_voters:
        return ErrorCode.INVALID_REQUEST, (
            "this quorum's voters are static (controller.quorum.voters); start the controllers "
            "with controller.quorum.bootstrap.servers to change them"
        )
    try:
        future = start()
    except NotControllerError as e:
        return ErrorCode.NOT_CONTROLLER, e.message
    except KraftError as e:
        return e.code, e.message
    on_appended(int(raft.node.log_end_offset))
    try:
        await asyncio.wait_for(asyncio.shield(future), COMMIT_WAIT_S)
    except TimeoutError:
        return ErrorCode.REQUEST_TIMED_OUT, (
            f"the voter change for node {voter_id} did not commit within {COMMIT_WAIT_S:g} s"
        )
    except NotControllerError as e:
        return ErrorCode.NOT_CONTROLLER, e.message
    except KraftError as e:
        return e.code, e.message
    return ErrorCode.NONE, ""


__all__ = ["add_raft_voter", "remove_raft_voter"]
