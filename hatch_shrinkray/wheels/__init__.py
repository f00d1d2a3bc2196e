"""Rewriting wheels built by any backend: the archive itself (``archive``) and what goes into it (``rewrite``)."""
