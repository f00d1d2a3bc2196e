"""The environment variables through which a recording reaches every process of a command."""

RECORD = "HATCH_SHRINKRAY_RECORD"
"""The directory where each process leaves its recorded samples (``DIR/.parts``)."""
RECORD_SAMPLES = "HATCH_SHRINKRAY_RECORD_SAMPLES"
RECORD_BYTES = "HATCH_SHRINKRAY_RECORD_BYTES"
