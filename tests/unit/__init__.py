"""The unit tier (tests/conftest.py). A package, so that a module here may share its name with the module
beside it in tests/ that holds the same subject's tests that start processes."""
