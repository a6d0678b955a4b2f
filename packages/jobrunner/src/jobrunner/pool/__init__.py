"""The pool (`jobrunner pool`): the `coordinator` that routes jobs to allowlisted workers and checks
their records, its HTTP `app`, the `spool` that holds an upload while workers are offered it, and
the `server` that runs it."""
