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
MAX_SAMPLES = 256
"""Default samples kept per model. The bytes bound (``MAX_BYTES``) decides for large inputs; small
ones need many samples: with a few dozen short audio chunks, ``auto`` fitted on too few failed its
own verification on the ones held out; this many leave enough to fit and to hold out."""
MAX_BYTES = 8_000_000
"""Default bytes of samples kept per model, in the file."""
MAX_BYTES_FOR_UNITS = 64_000_000
"""With the default byte bound, how far it grows when 16 independent units need more (a text
detector's pages from photographs, whose noise does not compress)."""
MAX_MEMORY = 512_000_000
"""Default bytes of a model's samples once loaded (the arrays a build decodes); a single feed may
take a sixteenth of it, so that 16 units always fit."""
CHECK = "HATCH_SHRINKRAY_CHECK"
"""A JSON file written by ``hatch-shrinkray check`` (``capture.swap``): which models each session
loads instead, which it runs in shadow, and the directory where each process reports."""
OUTCOMES = "HATCH_SHRINKRAY_OUTCOMES"
"""The directory where the pytest plugin ``capture.outcomes``, loaded inside the command's own
pytest, writes each session's test outcomes: ``check`` reads them without importing pytest itself."""
