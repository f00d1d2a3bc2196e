"""The Hatch build hook: the hook class, its TOML table, the manifest and the cache. Imports nothing heavy:
hatchling imports the hook just to ask for its dependencies."""
