"""The per-tensor encodings: a weight in, a ``Decode`` out (int8, fp16, float-levels), and the decode
chains they share (``_decode``, ``packing``). Fitting and the methods build on them; they import
neither."""
