"""A node: the HTTP interface (`app`, its `edge` that maps domain errors to answers, the `openapi`
document, the `metrics_app`), the job service behind it (`service`, with what a job's outputs cost
in its answers, `listing`), and the `server` that runs them on hypercorn (`jobrunner serve`)."""
