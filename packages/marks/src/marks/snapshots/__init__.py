"""Page snapshots: one self-contained, inert HTML file per capture (`sanitise`, `inline`), kept
compressed and once in the page store, listed, viewed and pruned (`service`)."""
