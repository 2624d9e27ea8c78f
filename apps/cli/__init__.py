"""The `dsh` command-line app."""
