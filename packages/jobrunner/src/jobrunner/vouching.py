"""Whether a front (the pool, or any node of a cluster) may vouch for a node's status record, and
the record it makes itself when it may not. Shared by `jobrunner pool` and the cluster mode.

A finished record is vouched for only if it is signed by a trusted key, for this job id and the
job hash announced when the job was accepted; otherwise the front reports the job `failed` with
`bad_signature` (or `worker_lost`), in a record of its own signed with its own key that carries
nothing of the node's results.
"""

from collections.abc import Collection

from jobrunner.jobs import timestamp
from jobrunner.signing import FINISHED, RecordProblem, WorkerKey, check_record, result_message
from jobrunner.wire import ExecutionMetadata, Failure, StatusRecord, WorkerMetadata


def problem(
    record: StatusRecord, trusted: Collection[str], job_id: str, job_hash: str | None
) -> str | None:
    """Why `record` cannot be vouched for as this job's (None: it can). `trusted` holds the
    public keys (worker ids) allowed to sign it."""
    if record.status not in FINISHED:
        if record.job_id != job_id:
            return f"job_id: {record.job_id!r} is another job's"
        if job_hash is not None and record.job_hash != job_hash:
            return f"job_hash: {record.job_hash!r} is not the one announced at submit"
        return None
    signer = record.worker_metadata.worker_id
    if signer not in trusted:
        return f"worker_id: {signer!r} is not an allowed key"
    try:
        check_record(record, signer, job_id=job_id, job_hash=job_hash)
    except RecordProblem as found:
        return str(found)
    return None


def own_record(
    key: WorkerKey, job_id: str, job_hash: str | None, created_at: str, failure: Failure
) -> StatusRecord:
    """A finished `failed` record made (and signed) by the front itself, without results."""
    record = StatusRecord(
        job_id=job_id,
        status="failed",
        execution_metadata=ExecutionMetadata(),
        job_hash=job_hash or "",
        output_files={},
        worker_metadata=WorkerMetadata(key.worker_id, None),
        position=None,
        created_at=created_at,
        started_at=None,
        finished_at=timestamp(),
        wall_seconds=0.0,
        failure=failure,
    )
    record.worker_metadata.signature = key.sign(result_message(record))
    return record
