"""Fitting to real inputs, shared by the methods that fit data (int8's output-aware rounding, ``auto``)
and by ``check``: the probe session (``probe``), the calibration runs and their moments (``calibrate``,
``calib``), the candidate encodings of a weight (``candidates``), the accuracy budget (``budget``), the
do-no-harm guard (``guard``), the knapsack search (``search``), single-tensor sensitivity
(``sensitivity``), classifier heads (``heads``) and the encodings chosen per tensor (``choices``). It
builds on ``encodings`` and imports no method."""
