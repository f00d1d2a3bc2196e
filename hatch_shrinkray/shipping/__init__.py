"""What ships for each configured model, whatever builds the archive: the configuration table, the
manifest, the cache and the per-model decision (pass through, serve from the cache, shrink). The
Hatch hook and the wheel rewriter are thin shells over it. Imports nothing heavy: the engine is
imported only when a model must actually be shrunk."""
