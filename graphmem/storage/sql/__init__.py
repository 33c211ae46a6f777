"""The SQL both engines run, each statement spelling what the engines spell differently through
the connection's dialect (:mod:`graphmem.storage.sql.dialect`): plain functions of a connection
and a time scope, and ``SQLStore``, the store built on them."""
