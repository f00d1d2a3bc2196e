"""Watching a real workload use onnxruntime: ``hatch-shrinkray record`` and the pytest plugin.

``boot`` runs at interpreter start when asked to (standard library only: nothing happens and
nothing is imported unless an environment variable asks for it) and waits for onnxruntime to be
imported; ``session`` then instruments ``InferenceSession``; ``recorder`` keeps a bounded,
deterministic sample of each model's feeds; ``run`` drives a command under recording and merges
what its processes wrote.
"""
