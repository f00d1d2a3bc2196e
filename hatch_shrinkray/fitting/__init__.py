"""The accuracy-budgeted search (method ``auto``): probe session, calibration, candidates per weight,
sensitivity and the knapsack search."""
