"""The Hatch build hook: the hook class and how its results reach hatchling's archive. Imports nothing
heavy: hatchling imports the hook just to ask for its dependencies."""
