"""The ``kueuestream`` command line: one module per command, :mod:`.main` puts them together."""
