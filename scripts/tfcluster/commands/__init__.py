"""The command line: one module per command (its parser and `main`), over the rest of tfcluster."""
