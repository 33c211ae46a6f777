"""Tools for developing graphmem, kept out of the installed package: the scale-out topology on
loopback (``devtools.cluster``) that the tests, the benches and ``make cluster`` start."""
