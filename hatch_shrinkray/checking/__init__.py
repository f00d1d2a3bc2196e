"""``hatch-shrinkray check``: the package's own tests and workloads judge the shrunk models.

``models`` shrinks what the configuration says (through the cache, keeping models that fail the
tolerance verification, which is reported but does not decide here); ``verdict`` compares a run
with the original models to a run with the shrunk ones, test by test; ``fix`` finds, per model to
blame, the cheapest remedy with which the tests pass again; ``search`` escalates the most sensitive
tensors until the tests pass and the shadow decisions hold; both write the plan file the hook ships
from; ``report`` says all of it for people and as JSON.
"""
