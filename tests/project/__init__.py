"""Repository-wide checks: the generated docs and Python reference, and the layers' imports."""
