"""The methods: one module per method behind the interface in ``base``, built on ``fitting`` (the
methods that fit data) and ``encodings`` (the per-tensor encodings); ``runtimes`` says what each needs
in the runtimes a model ships to. The registry that names them all is ``hatch_shrinkray.registry``;
this package imports nothing so that importing one method never loads the others."""
