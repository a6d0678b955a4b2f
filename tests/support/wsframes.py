"""Reading a server's WebSocket frames off a raw socket (a client that decides when to read)."""

import socket


def read_frames(sock: socket.socket) -> list[tuple[int, bytes]]:
    """(opcode, payload) of each server frame (unmasked), up to a close frame or the end."""
    buffer = b""
    frames: list[tuple[int, bytes]] = []

    def need(count: int) -> bool:
        nonlocal buffer
        while len(buffer) < count:
            data = sock.recv(1 << 20)
            if not data:
                return False
            buffer += data
        return True

    while need(2):
        opcode, length, header = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
        if length == 126:
            if not need(4):
                break
            length, header = int.from_bytes(buffer[2:4], "big"), 4
        elif length == 127:
            if not need(10):
                break
            length, header = int.from_bytes(buffer[2:10], "big"), 10
        if not need(header + length):
            break
        frames.append((opcode, buffer[header : header + length]))
        buffer = buffer[header + length :]
        if opcode == 8:
            break
    return frames
