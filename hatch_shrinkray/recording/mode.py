"""What a run does with an earlier recording of the same model (``record --mode``): ``replace`` it, or
``add`` to it: its samples join the run's parts before the merge (``merge.earlier_parts``), so the
bounds and the choice of units apply to the whole, and repeated feeds count once. Names only: the
command line imports them without numpy."""

REPLACE, ADD = "replace", "add"
MODES = (REPLACE, ADD)
