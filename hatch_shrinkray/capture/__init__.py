"""Watching a real workload use onnxruntime: ``hatch-shrinkray record`` and the pytest plugin.

``boot`` runs at interpreter start when asked to (standard library only: nothing happens and
nothing is imported unless an environment variable asks for it), leaves the process's boot marker
(``process``) and waits for onnxruntime to be imported; ``session`` then instruments
``InferenceSession``: each successful ``run()`` goes, with its stream step (``streams``) and the test
it ran in (``units``, set by ``testunits``), to the model's ``recorder``, which keeps a bounded
candidate set; at exit each process writes its parts and its report. ``run`` drives a command under
recording and turns a run's parts into one recording per model (``recording.merge``).
"""
