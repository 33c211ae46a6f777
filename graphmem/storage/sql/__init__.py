"""The SQL both engines run, written in SQLite's dialect (PostgreSQL runs it translated by
:mod:`graphmem.storage.postgres.dialect`): plain functions of a connection and a time scope, and
``SQLStore``, the store built on them."""
