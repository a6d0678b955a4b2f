"""Several machines on one Valkey/Redis 7+ (`jobrunner serve --cluster redis://...`).

`store` connects and names the keys; `queue` is the one queue of the cluster (Lua scripts, so
that an enqueue, a claim or a finish is atomic); `limits` the per-client rate limits counted
across nodes; `registry` the nodes, their heartbeats and the operator's allowlist of keys;
`logs` the jobs' logs as capped streams; `service` and `http` plug all this into a node.
"""
