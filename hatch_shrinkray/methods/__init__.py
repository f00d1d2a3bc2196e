"""The encodings: one module per method behind the interface in ``onnxgraph.encoding``, plus the
decode chains they share (``_decode``, ``packing``). The registry that names them all is
``hatch_shrinkray.registry``; this package imports nothing so that importing one method never
loads the others."""
