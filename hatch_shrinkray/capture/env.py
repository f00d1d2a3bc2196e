"""The environment variables through which a recording reaches every process of a command."""

RECORD = "HATCH_SHRINKRAY_RECORD"
"""The directory where each process of one ``record`` run leaves its recorded samples
(``DIR/.parts/<run id>``), its boot marker and its exit report (``capture.process``)."""
UNIT = "HATCH_SHRINKRAY_UNIT"
"""The test a subprocess was started in (``test:<pytest node id>``): the unit its calls belong to."""
RECORD_SAMPLES = "HATCH_SHRINKRAY_RECORD_SAMPLES"
RECORD_BYTES = "HATCH_SHRINKRAY_RECORD_BYTES"
RECORD_CEILING = "HATCH_SHRINKRAY_RECORD_CEILING"
"""How far the byte bound may grow so that 16 units fit (``RECORD_BYTES`` when it is hard)."""
RECORD_MEMORY = "HATCH_SHRINKRAY_RECORD_MEMORY"
CHECK = "HATCH_SHRINKRAY_CHECK"
"""A JSON file written by ``hatch-shrinkray check`` (``capture.swap``): which models each session
loads instead, which it runs in shadow, and the directory where each process reports."""
OUTCOMES = "HATCH_SHRINKRAY_OUTCOMES"
"""The directory where the pytest plugin ``capture.outcomes``, loaded inside the command's own
pytest, writes each session's test outcomes: ``check`` reads them without importing pytest itself."""
