"""A closed connection's objects freed at once by reference counting, not by the cyclic collector.

Every connection hypercorn serves left about 39 objects that only Python's cyclic garbage
collector could free, whatever the request (a `GET /health` as much as a refused upload):

- hypercorn's `TCPServer` holds its `ProtocolWrapper`, which holds the server's `protocol_send`
  (a bound method of the server), and its task group holds the tasks that refer back to it;
- CPython's (3.11) selector socket transport holds `_read_ready_cb`, a bound method of itself,
  with its `extra` dict and socket objects (over TLS that transport lies under asyncio's TLS
  layer, which lets go of it when the connection is lost: it is found while the connection is
  open);
- a connection that ended in a reset or a write timeout keeps that exception in its stream
  protocol's close-waiter future, and the exception's traceback holds the frame that awaited
  the future (hypercorn's `_close` awaiting `wait_closed`): a cycle through the future.

A connection that lives a few seconds (a download, a long poll, a keep-alive held by a client
that sends nothing more) outlives two young collections and ends in the oldest generation, so
its cycles are freed only by a full collection. Under bench-hostile's attackers (hundreds of
connections a minute held for seconds) that was 8,000-29,000 objects per full collection, with
pauses of 60-600 ms during which the server answered nobody. Breaking the three links when the
connection has ended lets reference counting free it all at that moment, a few objects at a time.

The last links are private attributes of CPython's asyncio: they are cleared only where they
exist and only once the transport is closed (no callback can use them again); elsewhere nothing
changes but the garbage.
"""

import asyncio
from typing import Any

_installed: list[bool] = []  # the patch is made once per process, however many servers start


def free_when_closed() -> None:
    """Make every hypercorn (asyncio) connection drop its cyclic references when it ends."""
    from hypercorn.asyncio.tcp_server import TCPServer

    if _installed:
        return
    serve_connection = TCPServer.run

    async def run(self: TCPServer) -> None:
        beneath = _socket_transport_beneath(vars(self).get("writer"))
        try:
            await serve_connection(self)
        finally:
            _forget(self)
            if beneath is not None:
                _release_transport(beneath)

    _installed.append(True)
    TCPServer.run = run  # type: ignore[method-assign]


def _forget(server: Any) -> None:
    """Called when `server`'s connection has ended (hypercorn has closed its writer and awaited
    its task group): drop the links that make its objects a cycle."""
    writer = vars(server).get("writer")
    # The protocol (whose `send` is the server's method) and the task group (whose tasks ran
    # the server's methods) are used by nothing once `run` has returned.
    vars(server).pop("protocol", None)
    vars(server).pop("_task_group", None)
    if isinstance(writer, asyncio.StreamWriter):
        _release_transport(writer.transport)
        _drop_close_traceback(writer)


def _socket_transport_beneath(writer: object) -> asyncio.BaseTransport | None:
    """A TLS connection's socket transport (the writer's is asyncio's TLS layer over it), or
    None for a plain one."""
    if not isinstance(writer, asyncio.StreamWriter):
        return None
    tls_layer = getattr(writer.transport, "_ssl_protocol", None)
    beneath = getattr(tls_layer, "_transport", None)
    return beneath if isinstance(beneath, asyncio.BaseTransport) else None


def _release_transport(transport: asyncio.BaseTransport) -> None:
    """The selector transport's read callback is a bound method of itself; once it is closing
    its socket is out of the selector, so the callback is never called again."""
    fields = vars(transport)  # the callback is an instance attribute, where CPython has it
    if transport.is_closing() and fields.get("_read_ready_cb") is not None:
        fields["_read_ready_cb"] = None


def _drop_close_traceback(writer: asyncio.StreamWriter) -> None:
    """The exception the connection was lost with (a reset, a write timeout) stays in the
    close-waiter future; its traceback holds the frames that awaited that future."""
    waiter = getattr(getattr(writer, "_protocol", None), "_closed", None)
    if isinstance(waiter, asyncio.Future) and waiter.done() and not waiter.cancelled():
        error = waiter.exception()
        if error is not None:
            error.__traceback__ = None
