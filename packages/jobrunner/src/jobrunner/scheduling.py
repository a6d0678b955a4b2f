"""Which queued job starts next: each client's fair share of slot time, not first come first served.

Clients are keyed as the rate limits key them: the HTTP edge derives the key from the client's
address (`servekit.rate_key`: an IPv4 address, an IPv6 /64) and passes it in; nothing here parses
addresses, so the domain layer loads no HTTP code.
The ledger holds, per client, the time its jobs held a slot over the last `window` seconds,
counted as they run (a running job counts from its start, or from the window's start, to now).

When a slot frees, the next job is the head of the queue of the client with the least slot time
in the window (ties: the client whose head job has waited longest); within a client, first in
first out. So a client whose jobs run for their whole time limit waits behind everyone who held
less, and its long jobs cost it the wait, not the others.

The order alone cannot keep slots for short jobs: when nobody else is queued the long jobs take
every free slot, and a short job arriving next waits for one of them to end. So `reserved` of the
`slots` are kept for *short* jobs while short clients are about: the other jobs together run in
at most `slots - reserved` of them. A job is short if its manifest's timeout is at most
`short_job` seconds (it cannot hold the slot longer), or if its client's jobs in the window held
a slot `short_job` seconds or less on average (a client none of whose jobs has ended in the window
has shown nothing yet and is not short by history: a newcomer's first job runs beside the long
ones, and is first among them in the order, having held nothing). "About" means some client in
the ledger is short by history; with none, every slot goes to whoever is first in the order. A
job that has waited `patience` seconds (the server's longest time limit) may take any free slot:
busy short clients can delay a long job, never starve it.

`order()` is the start order if nothing changed from now on (no time passing, no job ending):
the queued jobs by their client's slot time as of now, then by arrival. A job's position is the
number of jobs before it there. It changes as running jobs accrue slot time and as clients
submit, and a long job held back from the reserved slots can be overtaken by short ones.
"""

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW = 600.0  # twice the longest time limit (300 s): a job at the limit still counts when its
# owner's next jobs queue, and two such jobs in a row count in full.
SHORT_JOB = 5.0


@dataclass(frozen=True)
class Queued:
    job_id: str
    key: str  # the client's rate key
    seq: int  # order of arrival: the tie-break between clients, and FIFO within one
    short: bool  # its time limit is at most `short_job`
    since: float  # when it was queued


@dataclass
class _Client:
    queue: deque[Queued] = field(default_factory=deque)
    held: deque[tuple[float, float]] = field(default_factory=deque)  # (start, end) of ended jobs
    held_total: float = 0.0  # their whole lengths, summed
    longest: float = 0.0  # the longest of them
    running: dict[str, float] = field(default_factory=dict)  # job id -> start

    def idle(self) -> bool:
        return not (self.queue or self.held or self.running)


class Scheduler:
    def __init__(
        self,
        *,
        slots: int,
        window: float = WINDOW,
        short_job: float = SHORT_JOB,
        reserved: int = 0,
        patience: float = 300.0,
        clock: Callable[[], float],
    ) -> None:
        self.window = window
        self.short_job = short_job
        self.slots = slots
        self.reserved = reserved
        self._long: set[str] = set()  # jobs taken as not short, until they end
        self.patience = patience
        self.clock = clock
        self._clients: dict[str, _Client] = {}
        self._entries: dict[str, Queued] = {}  # the queued jobs by id (`position`, `remove`)
        self._seq = itertools.count()

    def __len__(self) -> int:
        """Jobs queued."""
        return len(self._entries)

    # --- the queue -------------------------------------------------------------------------------

    def add(self, job_id: str, client: str, timeout: float) -> Queued:
        """Queue a job of `client` (its rate key, as the edge derived it)."""
        entry = Queued(job_id, client, next(self._seq), timeout <= self.short_job, self.clock())
        self._clients.setdefault(client, _Client()).queue.append(entry)
        self._entries[job_id] = entry
        return entry

    def requeue(self, entry: Queued) -> None:
        """A taken job that could not start (its environment was being built) goes back to the
        head of its client's queue, with its place in the order of arrival."""
        self._clients.setdefault(entry.key, _Client()).queue.appendleft(entry)
        self._entries[entry.job_id] = entry
        self._long.discard(entry.job_id)

    def clear(self) -> None:
        for client in self._clients.values():
            client.queue.clear()
        self._entries.clear()

    def take(self, free: int) -> Queued | None:
        """The job to start in one of `free` free slots, taken off the queue; None if no queued
        job may start now (none queued, or only long ones and the long ones' slots taken)."""
        if free <= 0:
            return None
        now = self.clock()
        times = self._times(now)
        room_for_long = len(self._long) < self.slots - self.reserved
        open_to_all = room_for_long or not self._short_clients_about(times)
        for _, _, key in self._ranked(times):
            client = self._clients[key]
            head = client.queue[0]
            short = head.short or self._short_by_history(client, times[key])
            if short or open_to_all or now - head.since >= self.patience:
                client.queue.popleft()
                del self._entries[head.job_id]
                if not short:
                    self._long.add(head.job_id)
                return head
        return None

    def remove(self, job_id: str) -> None:
        """Take a queued job off the queue (cancelled); ValueError if it is not queued."""
        entry = self._entries.pop(job_id, None)
        if entry is None:
            raise ValueError(job_id)
        self._clients[entry.key].queue.remove(entry)

    # --- the ledger ------------------------------------------------------------------------------

    def started(self, entry: Queued) -> None:
        self._clients.setdefault(entry.key, _Client()).running[entry.job_id] = self.clock()

    def finished(self, entry: Queued) -> None:
        self._long.discard(entry.job_id)
        client = self._clients.get(entry.key)
        if client is None or (start := client.running.pop(entry.job_id, None)) is None:
            return
        end = self.clock()
        client.held.append((start, end))
        client.held_total += end - start
        client.longest = max(client.longest, end - start)

    def slot_time(self, client: str) -> float:
        """Seconds the client's jobs held a slot in the last `window` seconds."""
        held = self._clients.get(client)
        return self._slot_time(held, self.clock()) if held else 0.0

    def sweep(self) -> None:
        """Forget what has left the window, and clients with nothing left."""
        now = self.clock()
        for key, client in list(self._clients.items()):
            self._expire(client, now)
            if client.idle():
                del self._clients[key]

    # --- the order -------------------------------------------------------------------------------

    def order(self) -> list[str]:
        """Job ids in the order they start if nothing changes from now on: by their client's
        slot time as of now, then by arrival (a client's own jobs stay in its order, and each
        next one meets the other clients' waiting heads by its arrival)."""
        times = self._times(self.clock())
        queued = [entry for client in self._clients.values() for entry in client.queue]
        return [e.job_id for e in sorted(queued, key=lambda e: (times[e.key], e.seq))]

    def position(self, job_id: str) -> int | None:
        """How many jobs start before this one (see `order`); None if it is not queued. Counted
        per client rather than by sorting every queued job: each submit's answer and each read
        of a queued job asks."""
        entry = self._entries.get(job_id)
        if entry is None:
            return None
        times = self._times(self.clock())
        mine = times[entry.key]
        ahead = 0
        for key, client in self._clients.items():
            if not client.queue:
                continue
            if times[key] < mine:
                ahead += len(client.queue)
            elif times[key] == mine:  # then by arrival
                ahead += sum(1 for queued in client.queue if queued.seq < entry.seq)
        return ahead

    def _ranked(self, times: "_Times") -> list[tuple[float, int, str]]:
        """Clients with queued jobs, as (slot time, head's arrival, key), first to start first."""
        return sorted(
            (times[key], client.queue[0].seq, key)
            for key, client in self._clients.items()
            if client.queue
        )

    def _times(self, now: float) -> "_Times":
        return _Times(self._clients, self._slot_time, now)

    def _slot_time(self, client: _Client, now: float) -> float:
        since = now - self.window
        self._expire(client, now)
        total = client.held_total + sum(
            now - max(start, since) for start in client.running.values()
        )
        # Ended jobs are in the order they ended; only those that ended within `longest` of the
        # window's start can have started before it (a sum kept, not recounted at every choice).
        for start, end in client.held:
            if end - client.longest > since:
                break
            total -= max(0.0, since - start)
        return total

    def _expire(self, client: _Client, now: float) -> None:
        while client.held and client.held[0][1] <= now - self.window:
            start, end = client.held.popleft()
            client.held_total -= end - start
        if not client.held:
            client.held_total = client.longest = 0.0  # no rounding left over

    def _short_by_history(self, client: _Client, held: float) -> bool:
        """Its jobs held a slot `short_job` seconds or less on average (`held`: its slot time),
        running ones included; a client none of whose jobs has ended in the window has shown
        nothing yet."""
        ended, running = len(client.held), len(client.running)
        return ended > 0 and held <= self.short_job * (ended + running)

    def _short_clients_about(self, times: "_Times") -> bool:
        return any(
            self._short_by_history(client, times[key]) for key, client in self._clients.items()
        )


class _Times:
    """Each client's slot time as of one moment, worked out once however often one choice asks
    (the order, the short clients, each head's history): with 40 clients queued, one start
    worked it out 70 times."""

    def __init__(
        self,
        clients: dict[str, _Client],
        slot_time: Callable[[_Client, float], float],
        now: float,
    ) -> None:
        self._clients, self._slot_time, self._now = clients, slot_time, now
        self._known: dict[str, float] = {}

    def __getitem__(self, key: str) -> float:
        held = self._known.get(key)
        if held is None:
            held = self._known[key] = self._slot_time(self._clients[key], self._now)
        return held
