"""The environment variables through which a recording reaches every process of a command."""

RECORD = "HATCH_SHRINKRAY_RECORD"
"""The directory where each process leaves its recorded samples (``DIR/.parts``)."""
RECORD_SAMPLES = "HATCH_SHRINKRAY_RECORD_SAMPLES"
RECORD_BYTES = "HATCH_SHRINKRAY_RECORD_BYTES"
CHECK = "HATCH_SHRINKRAY_CHECK"
"""A JSON file written by ``hatch-shrinkray check`` (``capture.swap``): which models each session
loads instead, which it runs in shadow, and the directory where each process reports."""
