"""Recordings: a real workload's inputs to onnxruntime, one file per model, apart from how they are
made (``capture``) and how they are used (``verification``, ``fitting``, ``checking``).

``format`` says what a file holds and checks its metadata (versions); ``compact`` and ``encode`` turn
a feed into the file's members, ``npz`` is the zip container, read without trusting it; ``storage``
writes and reads files; ``matching`` finds a model's file in a directory; ``caps`` and ``select``
bound and choose what a recording keeps, ``merge`` makes one recording of many processes' parts,
and ``mode`` decides what a new run does with an earlier recording of the same model.
"""
